import { describe, expect, it } from 'vitest';
import { checkRoom, modelText, refusalText, roomSentence } from './room-check.ts';

describe('what the join page says about its room', () => {
  const open = {
    kind: 'open',
    roomId: 'AbCdEfGhIjKl',
    hostPresent: true,
    status: 'running',
    about: { preset: 'nano', params: 120_128, corpus: 'moby-dick' },
  } as const;

  it('names the model with its size and the text', () => {
    expect(roomSentence(open)).toBe(
      'Room AbCdEfGhIjKl trains nano (0.12M parameters) on Moby Dick; the host is here, training.',
    );
    expect(modelText({ preset: 'small', params: 10_800_000, corpus: null })).toBe('small (11M parameters)');
    expect(modelText({ preset: null, params: 3_210_000, corpus: null })).toBe('a model of 3.2M parameters');
    expect(modelText({ preset: null, params: null, corpus: 'x' })).toBeNull();
  });

  it('says when the host is away or has not published yet', () => {
    const away = roomSentence({ ...open, hostPresent: false, status: null, about: null });
    expect(away).toContain('has not said yet what it trains');
    expect(away).toContain('the host is away');
    expect(roomSentence({ ...open, about: { preset: 'tiny', params: null, corpus: 'my notes.txt' } })).toContain(
      'trains tiny on my notes.txt',
    );
  });

  it('refuses a link without a token before asking the server', async () => {
    expect(await checkRoom('AbCdEfGhIjKl', null)).toEqual({
      kind: 'refused',
      code: 'no-token',
      message: refusalText('no-token', 'AbCdEfGhIjKl'),
    });
    // the link was cut short: not the host's rotation
    expect(refusalText('no-token', 'R')).toMatch(/has no token .*cut short/);
    expect(refusalText('no-token', 'R')).not.toMatch(/rotated/);
    expect(refusalText('no-such-room', 'R')).toMatch(/^Room R does not exist/);
  });
});

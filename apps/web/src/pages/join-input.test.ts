import { describe, expect, it } from 'vitest';
import { ROOM_ID_LENGTH, readJoinInput, SECRET_LENGTH } from './join-input.ts';

const ROOM = 'AbCdEf_-1234';
const TOKEN = `${'x'.repeat(21)}-_${'Y'.repeat(20)}`;

describe('the join box', () => {
  it('knows the lengths of the ids the server issues', () => {
    // apps/server/src/rooms.ts: 9 random bytes for room ids, 32 for tokens, as base64url
    expect(ROOM_ID_LENGTH).toBe(Buffer.alloc(9).toString('base64url').length);
    expect(SECRET_LENGTH).toBe(Buffer.alloc(32).toString('base64url').length);
    expect(ROOM.length).toBe(ROOM_ID_LENGTH);
    expect(TOKEN.length).toBe(SECRET_LENGTH);
  });

  it('takes a join link, a watch link, a path, or a code and token', () => {
    const origin = 'https://shoal.example';
    const path = `/join/${ROOM}?token=${TOKEN}`;
    expect(readJoinInput(`  ${origin}${path} `, origin)).toEqual({ kind: 'go', href: path });
    expect(readJoinInput(`http://other.host:8080${path}`, origin)).toEqual({
      kind: 'go',
      href: `http://other.host:8080${path}`,
    });
    expect(readJoinInput(`${origin}/watch/${ROOM}?key=${TOKEN}`, origin)).toEqual({
      kind: 'go',
      href: `/watch/${ROOM}?key=${TOKEN}`,
    });
    expect(readJoinInput(path)).toEqual({ kind: 'go', href: path });
    expect(readJoinInput(`${ROOM} ${TOKEN}`)).toEqual({ kind: 'go', href: path });
    expect(readJoinInput(`${ROOM}?token=${TOKEN}`)).toEqual({ kind: 'go', href: path });
    expect(readJoinInput('   ')).toEqual({ kind: 'empty' });
  });

  it('turns no stray words into a room, and says what is wrong', () => {
    const problem = (text: string) => {
      const read = readJoinInput(text, 'https://shoal.example');
      return read.kind === 'invalid' ? read.problem : `accepted as ${JSON.stringify(read)}`;
    };
    expect(problem('hello world')).toMatch(/“hello” is not a room code: room codes are 12 characters/);
    expect(problem('hello')).toMatch(/^Paste the join link/);
    expect(problem(ROOM)).toMatch(/room code without its token/);
    expect(problem(`${ROOM} short`)).toMatch(/token should be 43 characters .*; this one has 5\./);
    expect(problem(`https://shoal.example/join/${ROOM}`)).toMatch(/no token/);
    expect(problem(`https://shoal.example/host/${ROOM}`)).toMatch(/not a Shoal join link/);
    expect(problem(`https://shoal.example/join/${ROOM}x?token=${TOKEN}`)).toMatch(/not a room code/);
    expect(problem(`https://shoal.example/join/${ROOM}?token=${TOKEN}!`)).toMatch(/token should be/);
    expect(problem('https://')).toMatch(/not a valid address/);
  });
});

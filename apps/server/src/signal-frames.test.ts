import { describe, expect, it } from 'vitest';
import { parseClientFrame } from './signal-frames.ts';
import { roomView } from './test-server.ts';

const limits = { maxJsonDepth: 16, maxFrameBytes: 256 };
const text = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
const outcome = (data: Buffer | Buffer[], options: { binary?: boolean; host?: boolean } = {}) => {
  const frame = parseClientFrame(data, options.binary ?? false, limits, options.host ?? false);
  return frame.ok ? frame.message.kind : frame.code;
};

describe('parseClientFrame', () => {
  it('takes a valid message, in one buffer or in fragments, and tells its size', () => {
    const join = { kind: 'join', version: 1, roomId: 'room', token: 'token' };
    expect(parseClientFrame(text(join), false, limits)).toEqual({ ok: true, message: join, bytes: text(join).length });
    const whole = text(join);
    expect(outcome([whole.subarray(0, 10), whole.subarray(10)])).toBe('join');
  });

  it('refuses, cheapest check first: binary, size, nesting, JSON, kind, schema', () => {
    expect(outcome(text('{"kind":'), { binary: true })).toBe('binary-frame');
    expect(outcome(text(`{"kind":"leave","pad":"${'x'.repeat(300)}"`))).toBe('too-big'); // unparsed
    expect(outcome(text(`${'['.repeat(20)}0${']'.repeat(20)}`))).toBe('too-deep');
    expect(outcome(text('{"kind":'))).toBe('bad-json');
    expect(outcome(text([1, 2]))).toBe('schema');
    expect(outcome(text({ kind: 'hello' }))).toBe('unknown-kind');
    const bad = parseClientFrame(
      text({ kind: 'join', version: 1, roomId: 'not base64url!', token: 't' }),
      false,
      limits,
    );
    expect(bad).toMatchObject({ ok: false, code: 'schema', ref: 'join' });
    expect(!bad.ok && bad.message).toMatch(/^roomId: /);
  });

  it("lets only a host's publish exceed maxFrameBytes", () => {
    const publish = text({ kind: 'publish', data: roomView('room', [1, 2, 3]) });
    expect(publish.length).toBeGreaterThan(limits.maxFrameBytes);
    expect(outcome(publish)).toBe('too-big');
    expect(outcome(publish, { host: true })).toBe('publish');
    const relay = parseClientFrame(text({ kind: 'relay', data: 'x'.repeat(300) }), false, limits, true);
    expect(relay).toMatchObject({ ok: false, code: 'too-big', ref: 'relay' });
  });
});

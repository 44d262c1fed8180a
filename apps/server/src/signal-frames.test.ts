import { describe, expect, it, vi } from 'vitest';
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
  it("refuses a host's oversized frame that is not a publish before parsing or scanning it", () => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const big = (value: object) => parseClientFrame(text(value), false, limits, true);
      expect(big({ kind: 'signal', to: 'x', data: 'x'.repeat(300) })).toMatchObject({ code: 'too-big', ref: 'signal' });
      expect(big({ kind: 'relay', data: 'x'.repeat(300) })).toMatchObject({ code: 'too-big', ref: 'relay' });
      // publish named anywhere but first does not pass for one
      expect(big({ data: 'x'.repeat(300), kind: 'publish' })).toMatchObject({ code: 'too-big' });
      expect(big({ pad: '{"kind":"publish"', data: 'x'.repeat(300) })).toMatchObject({ code: 'too-big' });
      expect(parse).not.toHaveBeenCalled();
      // a publish as the client writes it ({"kind":"publish",…}) is parsed, whitespace or not
      expect(big({ kind: 'publish', data: roomView('room', [1, 2, 3]) })).toMatchObject({ ok: true });
      const spaced = ` { "kind" : "publish", "data": ${JSON.stringify(roomView('room', [1, 2, 3]))} }`;
      expect(parseClientFrame(text(spaced), false, limits, true)).toMatchObject({ ok: true });
    } finally {
      parse.mockRestore();
    }
  });
});

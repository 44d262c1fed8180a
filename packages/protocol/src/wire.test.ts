import { describe, expect, it } from 'vitest';
import { CODEC_IDS } from './codec-ids.ts';
import { HEADER_BYTES, HEADER_OFFSETS, readHeader } from './header.ts';
import { DEFAULT_WIRE_LIMITS, resolveWireLimits } from './limits.ts';
import { MESSAGE_KINDS, MESSAGE_SPECS, type Message, PROTOCOL_VERSION } from './messages.ts';
import { createForger, SAMPLES, sameBytes } from './test-fixtures.ts';
import { createWireCodec, type DecodeResult, WireEncodeError } from './wire.ts';

const codec = await createWireCodec();
const { forge, reseal } = await createForger();

function expectRejected(result: DecodeResult, reason: string, detail?: RegExp) {
  expect(result.ok, JSON.stringify(result)).toBe(false);
  if (result.ok) return;
  expect(result.reason).toBe(reason);
  if (detail) expect(result.detail).toMatch(detail);
}

/** The sample's body as the JSON part, for forging variants of it. */
function bodyOf(message: Message): Record<string, unknown> {
  const skip = new Set<string>(['kind', 'payload', ...MESSAGE_SPECS[message.kind].header]);
  return Object.fromEntries(Object.entries(message).filter(([key]) => !skip.has(key)));
}

describe('wire round trips', () => {
  for (const kind of MESSAGE_KINDS) {
    it(`${kind}: decode(encode(m)) is m`, () => {
      const message = SAMPLES[kind] as Message;
      const bytes = codec.encode(message, 0xdead_beef);
      const result = codec.decode(bytes);
      expect(result).toEqual({ ok: true, message, runId: 0xdead_beef, minor: PROTOCOL_VERSION.minor });
      const header = readHeader(bytes);
      expect(header.kindId).toBe(MESSAGE_SPECS[kind].id);
      expect(header.major).toBe(PROTOCOL_VERSION.major);
      // the header holds the kind's fields and "none" in the others
      const fields = message as Partial<Record<string, unknown>>;
      const used = new Set<string>(MESSAGE_SPECS[kind].header);
      expect(header.fragment).toBe(used.has('fragment') ? fields.fragment : 0xffff);
      expect(header.round).toBe(used.has('round') ? fields.round : 0xffff_ffff);
      expect(header.shard).toBe(used.has('shard') ? fields.shard : 0xffff);
      expect(header.codecId).toBe(used.has('codec') ? CODEC_IDS[fields.codec as 'fp4'] : 0xff);
      expect(header.weight).toBe(used.has('weight') ? fields.weight : 0);
      const payload = (fields.payload as Uint8Array | undefined) ?? new Uint8Array(0);
      expect(bytes.length).toBe(HEADER_BYTES + header.jsonLength + payload.length);
      // header fields travel only in the header
      const json = JSON.parse(new TextDecoder().decode(bytes.subarray(HEADER_BYTES, HEADER_BYTES + header.jsonLength)));
      for (const field of used) expect(json).not.toHaveProperty(field);
    });
  }

  it('carries a large payload, as a view into the received bytes', () => {
    const payload = new Uint8Array(8 * 1024 * 1024).map((_, i) => (i * 2654435761) >>> 24);
    const message: Message = { ...SAMPLES.contribution, payload };
    const bytes = codec.encode(message, 1);
    const result = codec.decode(bytes);
    if (!result.ok || result.message.kind !== 'contribution') throw new Error(JSON.stringify(result));
    expect(sameBytes(result.message.payload, payload)).toBe(true); // toEqual walks 8M elements for a minute
    expect(result.message.payload.buffer).toBe(bytes.buffer);
  });

  it('accepts a newer minor version and strips the fields it does not know', () => {
    const bytes = forge({ minor: 7, json: { ...bodyOf(SAMPLES.hello), futureField: { nested: [1, 2] } } });
    const result = codec.decode(bytes);
    expect(result).toEqual({ ok: true, message: SAMPLES.hello, runId: 0, minor: 7 });
  });
});

describe('encode refuses what would not decode', () => {
  const cases: [string, Message, RegExp][] = [
    ['a schema violation', { ...SAMPLES.heartbeat, innerStep: -1 }, /innerStep/],
    ['a fractional weight', { ...SAMPLES.contribution, weight: 1.5 }, /weight/],
    ['a zero weight', { ...SAMPLES.contribution, weight: 0 }, /weight/],
    ['the "none" round', { ...SAMPLES.commit, round: 0xffff_ffff }, /round/],
    ['an unknown codec', { ...SAMPLES.contribution, codec: 'fp8' as 'fp4' }, /codec/],
    ['a state part of the wrong length', { ...SAMPLES['state-transfer'], end: 511 }, /8[0-9] bytes/],
    ['an accepted result without payload', { ...SAMPLES['shard-result'], payload: new Uint8Array(0) }, /empty payload/],
    ['misaligned shards', { ...SAMPLES['round-open'], blockSize: 100 }, /block grid/],
  ];
  for (const [name, message, detail] of cases) {
    it(name, () => {
      expect(() => codec.encode(message, 1)).toThrow(WireEncodeError);
      expect(() => codec.encode(message, 1)).toThrow(detail);
    });
  }
  it('a bad run id or an unknown kind', () => {
    expect(() => codec.encode(SAMPLES.leave, -1)).toThrow(/run id/);
    expect(() => codec.encode(SAMPLES.leave, 2 ** 32)).toThrow(/run id/);
    expect(() => codec.encode({ kind: 'gossip' } as unknown as Message, 1)).toThrow(/Unknown message kind/);
  });
  it('a message over the limits', async () => {
    const small = await createWireCodec({ limits: { maxMessageBytes: 1000, maxJsonBytes: 200 } });
    expect(() => small.encode({ ...SAMPLES.contribution, payload: new Uint8Array(1000) }, 1)).toThrow(/limit/);
    expect(() => small.encode(SAMPLES.welcome, 1)).toThrow(/JSON part/);
  });
});

describe('decode rejects malformed input with a specific reason', () => {
  const hello = codec.encode(SAMPLES.hello, 0);
  const contribution = codec.encode(SAMPLES.contribution, 5);
  const patched = (bytes: Uint8Array, offset: number, value: number, seal = true) => {
    const copy = bytes.slice();
    copy[offset] = value;
    return seal ? reseal(copy) : copy;
  };

  it('size, magic, version, kind, reserved bits', async () => {
    expectRejected(codec.decode('SHOL' as unknown as Uint8Array), 'not-bytes');
    expectRejected(codec.decode(new Uint8Array(0)), 'too-short');
    expectRejected(codec.decode(hello.subarray(0, HEADER_BYTES - 1)), 'too-short');
    const tiny = await createWireCodec({ limits: { maxMessageBytes: 100 } });
    expectRejected(tiny.decode(contribution), 'too-large', /limit/);
    expectRejected(codec.decode(patched(hello, 0, 0x54)), 'magic');
    expectRejected(
      codec.decode(patched(hello, HEADER_OFFSETS.major, 2)),
      'version',
      new RegExp(`protocol 2\\.${PROTOCOL_VERSION.minor}`),
    );
    expectRejected(codec.decode(patched(hello, HEADER_OFFSETS.kind, 0)), 'unknown-kind');
    expectRejected(codec.decode(patched(hello, HEADER_OFFSETS.kind, 200)), 'unknown-kind', /200/);
    expectRejected(codec.decode(patched(hello, HEADER_OFFSETS.kind, 5)), 'unknown-kind', /5/); // retired: metrics
    expectRejected(codec.decode(forge({ flags: 1 })), 'reserved');
    expectRejected(codec.decode(forge({ reserved: 4 })), 'reserved');
  });

  it('lengths that lie, huge declared lengths, truncation, trailing bytes', () => {
    expectRejected(codec.decode(hello.subarray(0, hello.length - 1)), 'length');
    const longer = new Uint8Array(hello.length + 3);
    longer.set(hello);
    expectRejected(codec.decode(longer), 'length');
    expectRejected(codec.decode(forge({ jsonLength: 5 })), 'length');
    expectRejected(codec.decode(forge({ payloadLength: 0xffff_ffff })), 'length');
    expectRejected(codec.decode(forge({ jsonLength: 0xffff_ffff })), 'json-too-large');
    expectRejected(codec.decode(forge({ jsonLength: DEFAULT_WIRE_LIMITS.maxJsonBytes + 1 })), 'json-too-large');
    const truncated = contribution.slice(0, contribution.length - 10);
    expectRejected(codec.decode(truncated), 'length', new RegExp(`declares ${contribution.length} bytes`));
  });

  it('header fields the kind does not use, or misuses', () => {
    expectRejected(codec.decode(forge({ fragment: 0 })), 'header-field', /hello does not use the fragment/);
    expectRejected(codec.decode(forge({ weight: 3 })), 'header-field', /weight/);
    const body = {};
    const payload = new Uint8Array(4);
    const contributionParts = {
      kindId: 7,
      round: 1,
      fragment: 0,
      shard: 0,
      codecId: 0,
      weight: 10,
      json: body,
      payload,
    };
    expect(codec.decode(forge(contributionParts)).ok).toBe(true);
    expectRejected(codec.decode(forge({ ...contributionParts, weight: 0 })), 'header-field', /weight/);
    expectRejected(codec.decode(forge({ ...contributionParts, weight: Number.NaN })), 'header-field', /weight/);
    expectRejected(codec.decode(forge({ ...contributionParts, weight: 2.5 })), 'header-field', /weight/);
    expectRejected(codec.decode(forge({ ...contributionParts, round: 0xffff_ffff })), 'header-field', /round/);
    expectRejected(codec.decode(forge({ ...contributionParts, fragment: 5000 })), 'header-field', /fragment/);
    expectRejected(codec.decode(forge({ ...contributionParts, codecId: 99 })), 'codec', /99/);
    expectRejected(codec.decode(forge({ payload: new Uint8Array(3) })), 'payload', /no payload/);
  });

  it('a hash that does not match', () => {
    const flipped = contribution.slice();
    flipped[flipped.length - 1] = (flipped[flipped.length - 1] as number) ^ 1;
    expectRejected(codec.decode(flipped), 'hash');
    expectRejected(codec.decode(patched(contribution, HEADER_OFFSETS.round, 9, false)), 'hash');
    expectRejected(codec.decode(patched(contribution, HEADER_OFFSETS.hash, 0, false)), 'hash');
  });

  it('a valid header with a JSON part that is not JSON', () => {
    expectRejected(codec.decode(forge({ json: Uint8Array.of(0x7b, 0xff, 0x7d) })), 'json', /UTF-8/);
    expectRejected(codec.decode(forge({ json: '{"role": "worker",' })), 'json', /parse/);
    expectRejected(codec.decode(forge({ json: '' })), 'json');
  });

  it('deeply nested JSON, before parsing it', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expectRejected(codec.decode(forge({ json: deep })), 'json-depth');
    const inside = JSON.stringify({ ...bodyOf(SAMPLES.hello), extra: 0 }).replace(
      '0}',
      `${'{"a":'.repeat(20)}1${'}'.repeat(20)}}`,
    );
    expectRejected(codec.decode(forge({ json: inside })), 'json-depth');
    // brackets inside strings do not count
    const quoted = { ...bodyOf(SAMPLES.hello), client: '[[[[[[[[[[[[[[[[[[[[[[[[\\"[[[[' };
    expect(codec.decode(forge({ json: quoted })).ok).toBe(true);
  });

  it('JSON that fails the schema names the field', () => {
    const body = bodyOf(SAMPLES.hello);
    expectRejected(codec.decode(forge({ json: [] })), 'schema');
    expectRejected(codec.decode(forge({ json: 'null' })), 'schema');
    expectRejected(codec.decode(forge({ json: '42' })), 'schema');
    expectRejected(codec.decode(forge({ json: { ...body, role: 'king' } })), 'schema', /^role/);
    expectRejected(codec.decode(forge({ json: { ...body, capabilities: undefined } })), 'schema', /^capabilities/);
    const spaced = { ...body, holds: [{ fragment: 0, round: 0, hash: 'XYZ' }] };
    expectRejected(codec.decode(forge({ json: spaced })), 'schema', /^holds\.0\.hash/);
    const heartbeat = { ...bodyOf(SAMPLES.heartbeat), reachable: ['a', 'a'] };
    expectRejected(codec.decode(forge({ kindId: 4, json: heartbeat })), 'schema', /unique/);
    // rejection counts: optional (an older peer's heartbeat has none), bounded, reason codes only
    const { rejectedContributions: _, ...older } = bodyOf(SAMPLES.heartbeat);
    expect(codec.decode(forge({ kindId: 4, json: older })).ok).toBe(true);
    const manyReasons = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`reason-${i}`, 1]));
    const tooMany = { ...older, rejectedContributions: manyReasons };
    expectRejected(codec.decode(forge({ kindId: 4, json: tooMany })), 'schema', /^rejectedContributions.*32 reasons/);
    const badKey = { ...older, rejectedContributions: { 'Not A Code': 1 } };
    expectRejected(codec.decode(forge({ kindId: 4, json: badKey })), 'schema', /^rejectedContributions/);
    const pollution = '{"__proto__": {"polluted": true}, "reason": "x"}';
    const left = codec.decode(forge({ kindId: 16, json: pollution }));
    expect(left).toEqual({ ok: true, message: { kind: 'leave', reason: 'x' }, runId: 0, minor: 0 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a corpus request or transfer outside its text, or for too much at once', () => {
    const request = (json: object) => codec.decode(forge({ kindId: 17, json }));
    const body = bodyOf(SAMPLES['corpus-request']) as { fingerprint: string; start: number; end: number };
    expect(request(body).ok).toBe(true);
    expectRejected(request({ ...body, end: 4097 }), 'schema', /^end.*lie in the text/);
    expectRejected(request({ ...body, start: 2048 }), 'schema', /^end.*below end/);
    expectRejected(request({ ...body, fingerprint: '4096:0BADF00D' }), 'schema', /^fingerprint/);
    expectRejected(request({ ...body, fingerprint: '0:0badf00d' }), 'schema', /^fingerprint/);
    expectRejected(request({ ...body, fingerprint: '99999999999:0badf00d' }), 'schema', /^fingerprint/);
    const huge = { fingerprint: '8388608:0badf00d', start: 0, end: 2 * 1024 * 1024 };
    expectRejected(request(huge), 'schema', /^end.*at most 1048576 bytes/);
    const transfer = bodyOf(SAMPLES['corpus-transfer']) as typeof body;
    const payload = new Uint8Array(6);
    expect(codec.decode(forge({ kindId: 18, json: transfer, payload })).ok).toBe(true);
    expectRejected(codec.decode(forge({ kindId: 18, json: { ...transfer, end: 5000 }, payload })), 'schema', /^end/);
  });

  it('a round-open whose shard table is wrong', () => {
    const base = { kindId: 6, fragment: 1, round: 4, codecId: CODEC_IDS.fp4 };
    const body = bodyOf(SAMPLES['round-open']) as { shards: { owner: string; start: number; end: number }[] };
    expect(codec.decode(forge({ ...base, json: body })).ok).toBe(true);
    const withShards = (shards: typeof body.shards) => codec.decode(forge({ ...base, json: { ...body, shards } }));
    const [s0, s1, s2] = body.shards as [(typeof body.shards)[0], (typeof body.shards)[0], (typeof body.shards)[0]];
    expectRejected(withShards([s0, { ...s1, start: s1.start + 1 }, s2]), 'schema', /starts at/);
    expectRejected(withShards([s0, s1]), 'schema', /cover/);
    expectRejected(withShards([s0, s1, { ...s2, owner: 'stranger' }]), 'schema', /not a participant/);
    expectRejected(withShards([s0, s1, { ...s2, owner: s0.owner }]), 'schema', /two shards/);
    expectRejected(withShards([{ ...s0, end: 0 }, { ...s1, start: 0 }, s2]), 'schema', /empty/);
  });

  it('a payload that contradicts the body', () => {
    const state = bodyOf(SAMPLES['state-transfer']);
    const stateParts = { kindId: 14, fragment: 0, round: 4, json: state };
    expect(codec.decode(forge({ ...stateParts, payload: new Uint8Array(80) })).ok).toBe(true);
    expectRejected(codec.decode(forge({ ...stateParts, payload: new Uint8Array(79) })), 'payload', /80 bytes/);
    const result = bodyOf(SAMPLES['shard-result']);
    const resultParts = { kindId: 8, fragment: 1, round: 4, shard: 2, codecId: 4, json: result };
    expectRejected(codec.decode(forge(resultParts)), 'payload', /empty payload/);
    const allRejected = { verdicts: [{ peer: 'peer-b', weight: 0, reason: 'norm', message: '9× the median' }] };
    expect(codec.decode(forge({ ...resultParts, json: allRejected })).ok).toBe(true);
    const stray = forge({ ...resultParts, json: allRejected, payload: new Uint8Array(2) });
    expectRejected(codec.decode(stray), 'payload', /no contribution/);
  });

  it('returns the kind once the header names it', () => {
    const result = codec.decode(forge({ kindId: 4, json: {} }));
    expect(result).toMatchObject({ ok: false, reason: 'schema', kind: 'heartbeat' });
    expect(codec.decode(patched(hello, 0, 0))).not.toHaveProperty('kind');
  });
});

describe('limits', () => {
  it('are checked when configured', () => {
    expect(() => resolveWireLimits({ maxMessageBytes: 0 })).toThrow(/maxMessageBytes/);
    expect(() => resolveWireLimits({ maxMessageBytes: 2 ** 32 })).toThrow(/maxMessageBytes/);
    expect(() => resolveWireLimits({ maxMessageBytes: 100, maxJsonBytes: 200 })).toThrow(/maxJsonBytes/);
    expect(() => resolveWireLimits({ maxJsonDepth: 1.5 })).toThrow(/maxJsonDepth/);
    expect(resolveWireLimits({ maxJsonDepth: 4 })).toEqual({ ...DEFAULT_WIRE_LIMITS, maxJsonDepth: 4 });
  });

  it('the default JSON depth admits the deepest sample with room to spare', async () => {
    const strict = await createWireCodec({ limits: { maxJsonDepth: 4 } });
    for (const kind of MESSAGE_KINDS) expect(strict.decode(codec.encode(SAMPLES[kind] as Message, 1)).ok).toBe(true);
    const stricter = await createWireCodec({ limits: { maxJsonDepth: 3 } });
    expectRejected(stricter.decode(codec.encode(SAMPLES.welcome, 1)), 'json-depth');
  });
});

/**
 * Fuzzing the decoder with a seeded generator: random buffers, random headers, and valid messages
 * mutated byte by byte (resealed, so the mutations reach the JSON and schema checks past the
 * hash) and value by value. The properties: decode never throws, and whatever it accepts is a
 * message the encoder accepts too and that encodes back to itself.
 */
import { describe, expect, it } from 'vitest';
import { HEADER_BYTES } from './header.ts';
import { MESSAGE_KINDS, MESSAGE_SPECS, type Message } from './messages.ts';
import { createForger, randomBytes, SAMPLES, seededRandom } from './test-fixtures.ts';
import { createWireCodec, type DecodeResult } from './wire.ts';

const codec = await createWireCodec();
const { forge, reseal } = await createForger();
const ROUNDS = 3000;

/** decode must not throw; an accepted message must survive encode → decode unchanged. */
function checkDecode(bytes: Uint8Array, reasons: Map<string, number>): DecodeResult {
  const result = codec.decode(bytes);
  const key = result.ok ? 'ok' : result.reason;
  reasons.set(key, (reasons.get(key) ?? 0) + 1);
  if (result.ok) {
    const again = codec.decode(codec.encode(result.message, result.runId));
    expect(again.ok && again.message).toEqual(result.message);
  } else {
    expect(result.reason).not.toBe('internal');
    expect(result.detail.length).toBeGreaterThan(0);
  }
  return result;
}

/** The kind bytes in use (not contiguous: retired ids are never reused). */
const KIND_IDS = MESSAGE_KINDS.map((kind) => MESSAGE_SPECS[kind].id);
const encoded = MESSAGE_KINDS.map((kind) => codec.encode(SAMPLES[kind] as Message, 77));

/** A random JSON-ish value of bounded depth: the building block of body mutations. */
function randomValue(random: () => number, depth = 0): unknown {
  const pick = Math.floor(random() * (depth > 3 ? 6 : 8));
  switch (pick) {
    case 0:
      return null;
    case 1:
      return random() < 0.5;
    case 2:
      return Math.floor((random() - 0.5) * 2 ** (random() * 60));
    case 3:
      return (random() - 0.5) * 10 ** Math.floor(random() * 40 - 20);
    case 4:
      return ['', 'peer-a', 'fp4', 'x'.repeat(Math.floor(random() * 2000)), 'non-finite', '09ec977e1bb6675a'][
        Math.floor(random() * 6)
      ];
    case 5:
      return '\u0000\ud800"\\';
    case 6:
      return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: Math.floor(random() * 4) }, (_, i) => [`k${i}`, randomValue(random, depth + 1)]),
      );
  }
}

/** Replaces, deletes or adds one value somewhere in a copy of `body`. */
function mutateJson(body: unknown, random: () => number): unknown {
  if (body === null || typeof body !== 'object' || random() < 0.2) return randomValue(random);
  const copy: Record<string, unknown> | unknown[] = Array.isArray(body) ? [...body] : { ...body };
  const keys = Object.keys(copy);
  const key = keys[Math.floor(random() * keys.length)];
  const roll = random();
  if (key === undefined || roll < 0.15)
    (copy as Record<string, unknown>)[`extra${Math.floor(roll * 100)}`] = randomValue(random);
  else if (roll < 0.3) delete (copy as Record<string, unknown>)[key];
  else (copy as Record<string, unknown>)[key] = mutateJson((copy as Record<string, unknown>)[key], random);
  return copy;
}

describe('decoder fuzz', () => {
  it(`${ROUNDS} random buffers, then ${ROUNDS} random headers with the right magic`, () => {
    const random = seededRandom(1);
    const reasons = new Map<string, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const length = Math.floor(random() ** 2 * 400);
      expect(checkDecode(randomBytes(length, random), reasons).ok).toBe(false);
    }
    for (let i = 0; i < ROUNDS; i++) {
      const bytes = randomBytes(HEADER_BYTES + Math.floor(random() * 200), random);
      bytes.set([0x53, 0x48, 0x4f, 0x4c, 1], 0);
      if (random() < 0.5) bytes[6] = KIND_IDS[Math.floor(random() * KIND_IDS.length)] as number;
      if (random() < 0.7) {
        // plausible: reserved bits clear, lengths that add up
        bytes.fill(0, 7, 8);
        bytes.fill(0, 21, 24);
        const view = new DataView(bytes.buffer);
        const jsonLength = Math.floor(random() * (bytes.length - HEADER_BYTES + 1));
        view.setUint32(32, jsonLength, true);
        view.setUint32(36, bytes.length - HEADER_BYTES - jsonLength, true);
      }
      expect(checkDecode(random() < 0.5 ? reseal(bytes) : bytes, reasons).ok).toBe(false);
    }
    expect(reasons.get('magic')).toBeGreaterThan(ROUNDS / 2);
    expect(reasons.size).toBeGreaterThanOrEqual(5);
  });

  it(`${ROUNDS} byte-level mutations of every kind, resealed and not`, () => {
    const random = seededRandom(2);
    const reasons = new Map<string, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const original = encoded[i % encoded.length] as Uint8Array;
      let bytes = original.slice();
      const roll = random();
      if (roll < 0.2) {
        bytes = bytes.slice(0, Math.floor(random() * bytes.length));
      } else if (roll < 0.3) {
        const longer = new Uint8Array(bytes.length + 1 + Math.floor(random() * 16));
        longer.set(bytes);
        bytes = longer;
      } else {
        for (let flips = 1 + Math.floor(random() * 4); flips > 0; flips--) {
          const at = random() < 0.5 ? Math.floor(random() * HEADER_BYTES) : Math.floor(random() * bytes.length);
          bytes[at] =
            random() < 0.5 ? Math.floor(random() * 256) : (bytes[at] as number) ^ (1 << Math.floor(random() * 8));
        }
      }
      if (bytes.length >= HEADER_BYTES && random() < 0.7) reseal(bytes);
      checkDecode(bytes, reasons);
    }
    // the mutations got past the hash into the later checks
    for (const reason of ['length', 'hash', 'json', 'schema', 'header-field'])
      expect(reasons.get(reason)).toBeGreaterThan(0);
  });

  it(`${ROUNDS} value-level mutations of every kind's body`, () => {
    const random = seededRandom(3);
    const reasons = new Map<string, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const kind = MESSAGE_KINDS[i % MESSAGE_KINDS.length] as (typeof MESSAGE_KINDS)[number];
      const sample = SAMPLES[kind] as Message & { payload?: Uint8Array };
      const skip = new Set<string>(['kind', 'payload', ...MESSAGE_SPECS[kind].header]);
      const body = Object.fromEntries(Object.entries(sample).filter(([key]) => !skip.has(key)));
      let json = body as unknown;
      for (let n = 1 + Math.floor(random() * 3); n > 0; n--) json = mutateJson(json, random);
      const used = new Set<string>(MESSAGE_SPECS[kind].header);
      const field = (name: string, none: number) =>
        used.has(name) ? (sample as unknown as Record<string, number>)[name] : none;
      const bytes = forge({
        kindId: MESSAGE_SPECS[kind].id,
        fragment: field('fragment', 0xffff),
        round: field('round', 0xffff_ffff),
        shard: field('shard', 0xffff),
        codecId: used.has('codec') ? 4 : 0xff,
        weight: field('weight', 0),
        json: JSON.stringify(json) ?? 'undefined',
        payload: sample.payload ?? new Uint8Array(0),
      });
      checkDecode(bytes, reasons);
    }
    expect(reasons.get('schema')).toBeGreaterThan(ROUNDS / 2);
    expect(reasons.get('ok')).toBeGreaterThan(ROUNDS / 20);
    expect(reasons.get('header-field')).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { MessageReceiver, OTHER, type Rejection, RejectionCounters } from './counters.ts';
import { HEADER_OFFSETS } from './header.ts';
import { PROTOCOL_VERSION } from './messages.ts';
import { createForger, randomBytes, SAMPLES, seededRandom } from './test-fixtures.ts';
import { createWireCodec } from './wire.ts';

const codec = await createWireCodec();
const { forge, reseal } = await createForger();

describe('MessageReceiver', () => {
  it('returns good messages and counts every class of bad one under its reason', () => {
    const seen: Rejection[] = [];
    let clock = 1000;
    const counters = new RejectionCounters({ now: () => clock++ });
    const receiver = new MessageReceiver(codec, { counters, onReject: (r) => seen.push(r) });
    const good = codec.encode(SAMPLES.commit, 9);
    expect(receiver.receive('peer-a', good)).toEqual(SAMPLES.commit);

    const flipped = good.slice();
    flipped[flipped.length - 2] = (flipped[flipped.length - 2] as number) ^ 0x10;
    const otherMajor = good.slice();
    otherMajor[HEADER_OFFSETS.major] = 9;
    const bad: [string, Uint8Array][] = [
      ['too-short', new Uint8Array(3)],
      ['magic', randomBytes(200, seededRandom(4))],
      ['version', reseal(otherMajor)],
      ['unknown-kind', forge({ kindId: 99 })],
      ['length', good.subarray(0, good.length - 1)],
      ['json-too-large', forge({ jsonLength: 2 ** 31 })],
      ['header-field', forge({ shard: 3 })],
      ['hash', flipped],
      ['json', forge({ json: '{"role":' })],
      ['json-depth', forge({ json: '['.repeat(5000) })],
      ['schema', forge({ json: { role: 'worker' } })],
      ['payload', forge({ payload: new Uint8Array(1) })],
    ];
    for (const [, bytes] of bad) expect(receiver.receive('peer-b', bytes)).toBeNull();
    const expected = Object.fromEntries(bad.map(([reason]) => [reason, 1]));
    expect(counters.byReason()).toEqual(expected);
    expect(counters.total()).toBe(bad.length);
    expect(counters.byPeer()).toEqual({ 'peer-b': bad.length });
    expect(seen.map((r) => r.reason)).toEqual(bad.map(([reason]) => reason));
    expect(seen[2]).toMatchObject({ from: 'peer-b', reason: 'version', at: 1002 });
    expect(seen[2]?.detail).toMatch(new RegExp(`protocol 9\\.${PROTOCOL_VERSION.minor}`));
    expect(seen.find((r) => r.reason === 'schema')?.kind).toBe('hello');
  });

  it('checks the run once it is known; a hello may say run 0', () => {
    const receiver = new MessageReceiver(codec);
    expect(receiver.receive('x', codec.encode(SAMPLES.leave, 5))).not.toBeNull(); // run not known yet
    receiver.runId = 7;
    expect(receiver.receive('x', codec.encode(SAMPLES.leave, 7))).not.toBeNull();
    expect(receiver.receive('x', codec.encode(SAMPLES.leave, 8))).toBeNull();
    expect(receiver.receive('x', codec.encode(SAMPLES.hello, 0))).not.toBeNull();
    expect(receiver.receive('x', codec.encode(SAMPLES.hello, 7))).not.toBeNull();
    expect(receiver.receive('x', codec.encode(SAMPLES.heartbeat, 0))).toBeNull();
    expect(receiver.counters.byReason()).toEqual({ 'wrong-run': 2 });
    expect(receiver.counters.recent()[0]).toMatchObject({ kind: 'leave', detail: 'leave of run 8, this room runs 7' });
  });

  it('counts rejections decided above the wire on the same counters', () => {
    const receiver = new MessageReceiver(codec);
    receiver.reject('peer-c', 'stale-round', 'round 3 of fragment 1 is closed', 'contribution');
    expect(receiver.counters.total('stale-round')).toBe(1);
    expect(receiver.counters.recent()[0]).toMatchObject({ from: 'peer-c', kind: 'contribution' });
  });

  it('never throws, whatever arrives', () => {
    const receiver = new MessageReceiver(codec, { runId: 3 });
    const random = seededRandom(5);
    for (let i = 0; i < 2000; i++) {
      expect(() => receiver.receive('fuzz', randomBytes(Math.floor(random() * 120), random))).not.toThrow();
    }
    for (const value of [null, undefined, 42, 'text', {}, [1, 2], new ArrayBuffer(60), new Uint16Array(40)]) {
      expect(receiver.receive('fuzz', value as unknown as Uint8Array)).toBeNull();
    }
    expect(receiver.counters.total()).toBe(2008);
  });
});

describe('RejectionCounters', () => {
  it('keeps memory bounded: capped reasons, peers and recent list', () => {
    const counters = new RejectionCounters({ recent: 3, maxReasons: 2, maxPeers: 2, now: () => 0 });
    for (let i = 0; i < 10; i++) counters.record({ from: `p${i}`, reason: `r${i % 4}`, detail: `#${i}` });
    expect(counters.total()).toBe(10);
    expect(counters.byReason()).toEqual({ r0: 3, r1: 3, [OTHER]: 4 });
    expect(counters.byPeer()).toEqual({ p0: 1, p1: 1, [OTHER]: 8 });
    expect(counters.recent().map((r) => r.detail)).toEqual(['#7', '#8', '#9']);
    expect(counters.total('r1')).toBe(3);
    expect(counters.total('missing')).toBe(0);
    counters.reset();
    expect(counters.total()).toBe(0);
    expect(counters.recent()).toEqual([]);
  });
});

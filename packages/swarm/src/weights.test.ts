import type { Message } from '@shoal/protocol';
import { createRoom, must, RUN } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import { contributionOf } from './test-wire.ts';

describe('a contribution that claims more tokens than its sender trained', () => {
  it('weighs no more than the coordinator saw it train (round-open weightCaps), not the 2× median cap', async () => {
    const room = await createRoom({ workers: 4 });
    const { network, codec, workers } = room;
    const bad = must(workers[3]);
    // w3 trains honestly but claims 2⁴⁰ tokens behind every contribution (the header's weight).
    const forged = new Set<Uint8Array>();
    network.onSend(bad.peer, (to, bytes) => {
      if (forged.has(bytes) || !contributionOf(bytes)) return 'deliver';
      const decoded = codec.decode(bytes);
      if (!decoded.ok || decoded.message.kind !== 'contribution') return 'deliver';
      const out = codec.encode({ ...decoded.message, weight: 2 ** 40 } as Message, RUN);
      forged.add(out);
      queueMicrotask(() => void bad.member.transport.send(to, out));
      return 'drop';
    });
    const opens = room.spy(room.hostMember, 'round-open');
    const results = room.spyResults(room.hostMember);
    room.startAll();
    await room.finish(5_500);
    expect(forged.size).toBeGreaterThan(0);

    let checked = 0;
    let seenBinds = 0;
    // (w3's own shard takes its own contribution without the wire: that one is honest)
    for (const { message } of results.filter((r) => r.from !== bad.peer)) {
      const open = must(
        opens.find((o) => o.message.fragment === message.fragment && o.message.round === message.round),
      );
      const caps = must(open.message.weightCaps);
      const capOf = (peer: string) => caps[open.message.participants.indexOf(peer)] as number;
      const weights = new Map(message.verdicts.map((v) => [v.peer, v.weight]));
      if (!open.message.participants.includes(bad.peer)) continue;
      const claimed = must(weights.get(bad.peer));
      // capped at what w3's heartbeats showed plus H steps, or 2× the median, whichever is lower
      expect(claimed).toBe(Math.min(capOf(bad.peer), open.message.maxWeight));
      if (capOf(bad.peer) < open.message.maxWeight) seenBinds++;
      // an honest worker's weight is what it trained, within its cap
      for (const w of workers.slice(0, 3)) expect(weights.get(w.peer)).toBeLessThanOrEqual(capOf(w.peer));
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(8);
    // the coordinator's own record binds where it is the tighter of the two caps (w3's first round;
    // after a bench, its record spans the bench and 2× the median is the tighter)
    expect(seenBinds).toBeGreaterThanOrEqual(3);
    expect(room.aborted()).toEqual([]);
  });
});

describe('an honest worker 3× faster than the rest', () => {
  it('counts 2× the median weight (the cap), trains 2× the steps, and its Δ is never refused nor clipped by much', async () => {
    const SECONDS = 6_000;
    const room = await createRoom({ workers: 4, spec: (i) => ({ computeMsPerStep: i === 0 ? 33 : 100 }) });
    const opens = room.spy(room.hostMember, 'round-open');
    const results = room.spyResults(room.hostMember);
    room.startAll();
    await room.finish(SECONDS);
    expect(room.aborted()).toEqual([]);
    const fast = must(room.workers[0]);
    let checked = 0;
    for (const { message } of results) {
      if (message.round < 2 || message.check) continue; // the first round of each fragment counts the warm-up
      const open = must(
        opens.find((o) => o.message.fragment === message.fragment && o.message.round === message.round),
      );
      const weights = new Map(message.verdicts.map((v) => [v.peer, v] as const));
      const mine = must(weights.get(fast.peer));
      expect(mine.reason).toBe('');
      // it trained about twice the median's steps past each round (its slack is H·(cap − 1)): at the cap
      expect(mine.weight).toBeLessThanOrEqual(open.message.maxWeight);
      const others = ['w1', 'w2', 'w3'].map((peer) => weights.get(peer)?.weight as number);
      const ratio = mine.weight / Math.min(...others);
      expect(ratio, `(${message.fragment}, ${message.round})`).toBeGreaterThanOrEqual(1.5);
      expect(ratio).toBeLessThanOrEqual(2.05);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(8);
    // 2H steps can take its Δ past 2× the median norm (2.5× measured), where the rule scales it
    // back (centered-clip's and clipped-mean's first step), counted as 'norm-clipped': never by much
    for (const member of [room.hostMember, ...room.workers.map((w) => w.member)]) {
      for (const r of member.counters.recent().filter((r) => r.reason === 'norm-clipped')) {
        expect(r.from).toBe(fast.peer);
        expect(Number.parseFloat(r.detail.split(': ')[1] as string)).toBeLessThan(3);
      }
    }
    const slow = must(room.workers[1]).worker.metrics.innerStep;
    expect(fast.worker.metrics.innerStep).toBeGreaterThanOrEqual(1.8 * slow);
  });
});

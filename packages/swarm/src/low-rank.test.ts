/**
 * DiLoCoX in a room (docs/lowrank.md): rounds of rank-r factors through the real collective
 * (owners, checkers, the host's replica), the one-step delay, and the room's adaptive rank.
 */
import { buildFragments, lowRankPayloadSize } from '@shoal/diloco';
import { buildLayout } from '@shoal/model';
import { createRoom, evaluate, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import type { CoordinatorEvent } from './coordinator.ts';

type Opened = Extract<CoordinatorEvent, { event: 'round-opened' }>;

describe('a low-rank room with the one-step delay', () => {
  it('commits rounds of factors a fraction of the fragment, replicas agree bitwise, and loss falls', {
    timeout: 120_000,
  }, async () => {
    const room = await createRoom({ workers: 3, diloco: { lowRank: { rank: 4, target: 0 }, overlapRounds: 1 } });
    const { config, host, workers } = room;
    const initialLoss = await evaluate(config, host.params());
    room.startAll();
    await room.finish(12_000);
    const fragments = buildFragments(buildLayout(config.model), 2, 'sequential');
    const opened = room.events.filter((e): e is Opened => e.event === 'round-opened');
    expect(opened.length).toBeGreaterThanOrEqual(6);
    for (const e of opened) {
      const fragment = fragments[e.fragment];
      const side = e.round % 2 === 1 ? 'right' : 'left';
      if (e.round === 1) {
        // its first round is dense: the momentum the bases come from is still zero
        expect(e.rank).toBeNull();
        expect(e.payloadValues).toBe(fragment?.size);
        continue;
      }
      expect(e.rank).toBe(4);
      expect(e.payloadValues).toBe(lowRankPayloadSize(fragment?.tensors ?? [], { rank: 4, side }));
      expect(e.payloadValues).toBeLessThan((fragment?.size ?? 0) / 5);
    }
    expect(room.aborted()).toEqual([]);
    const hostStates = host.fragmentStates();
    for (const w of workers) expect(replicaStates(w.worker)).toEqual(hostStates);
    const finalLoss = await evaluate(config, host.params());
    expect(finalLoss).toBeLessThan(initialLoss - 1);
  });

  it('moves each fragment to the smallest rank the participants report good enough', {
    timeout: 120_000,
  }, async () => {
    // target 1: every rank meets it
    const room = await createRoom({ workers: 3, diloco: { lowRank: { rank: 8, target: 1 } } });
    room.startAll();
    await room.finish(8_000);
    const opened = room.events.filter((e): e is Opened => e.event === 'round-opened');
    for (const p of [0, 1]) {
      const ranks = opened.filter((e) => e.fragment === p).map((e) => e.rank);
      expect(ranks.length).toBeGreaterThanOrEqual(3);
      // its first round is dense (and the second, when it opens before the first is reported);
      // from the third on a rank below the most, down to 1 (every rank's error is under the
      // target; a step down needs 90% of it, which rank 1 may take a round or two to show)
      expect(ranks[0]).toBeNull();
      expect(ranks.slice(2).every((r) => r !== null && r < 8)).toBe(true);
      expect(ranks.at(-1)).toBe(1);
    }
    expect(room.aborted()).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { createRoom, must, replicaStates } from './test-room.ts';

const SECONDS = 8_000;

describe('a worker 5× slower than the rest', () => {
  it('keeps contributing with about a fifth of the token weight, and the others train as fast as without it', async () => {
    const mixed = await createRoom({ workers: 4, spec: (i) => ({ computeMsPerStep: i === 3 ? 500 : 100 }) });
    const results = mixed.spyResults(mixed.hostMember);
    const commits = mixed.spy(mixed.hostMember, 'commit');
    mixed.startAll();
    await mixed.finish(SECONDS);
    // The same three fast workers without the slow one, over the same virtual time.
    const alone = await createRoom({ workers: 3 });
    alone.startAll();
    await alone.finish(SECONDS);

    const slow = must(mixed.workers[3]);
    expect(mixed.aborted()).toEqual([]);
    const committed = commits.filter((c) => c.message.contributors.length > 0);
    expect(committed.length).toBeGreaterThanOrEqual(10);
    // Every committed round's shard results weigh the slow worker's Δ by its tokens: about 1/5 of a
    // fast worker's (it trained 2 or 3 steps to their 10 since its last contribution to the fragment).
    let ratios = 0;
    for (const commit of committed) {
      const { fragment, round } = commit.message;
      expect(commit.message.contributors).toContain(slow.peer);
      const shards = results.filter((r) => r.message.fragment === fragment && r.message.round === round);
      expect(shards.length).toBe(4);
      for (const { message } of shards) {
        const weights = new Map(message.verdicts.map((v) => [v.peer, v] as const));
        const slowWeight = weights.get(slow.peer);
        expect(slowWeight?.reason, `(${fragment}, ${round}) shard ${message.shard}`).toBe('');
        expect(slowWeight?.weight).toBeGreaterThan(0);
        if (round < 2) continue; // the first round of each fragment counts the warm-up steps
        const fast = ['w0', 'w1', 'w2'].map((peer) => weights.get(peer)?.weight as number);
        const ratio = (slowWeight?.weight as number) / Math.min(...fast);
        expect(ratio, `(${fragment}, ${round}) weight ratio`).toBeGreaterThan(0.15);
        expect(ratio, `(${fragment}, ${round}) weight ratio`).toBeLessThanOrEqual(0.3);
        ratios++;
      }
    }
    expect(ratios).toBeGreaterThanOrEqual(8 * 4);
    expect(slow.worker.metrics.contributions).toBeGreaterThanOrEqual(committed.length);

    // The fast workers' inner loops did not wait for the slow one: as many steps and contributions
    // as in the room without it (a few % slack), and no more time stalled. (Both rooms wait a little
    // where a round has not committed τ steps after its contribution: the merge is due there.)
    for (let i = 0; i < 3; i++) {
      const withSlow = must(mixed.workers[i]).worker.metrics;
      const without = must(alone.workers[i]).worker.metrics;
      expect(without.innerStep).toBeGreaterThanOrEqual(0.9 * (SECONDS / 100));
      expect(withSlow.innerStep, `w${i} steps`).toBeGreaterThanOrEqual(0.97 * without.innerStep);
      expect(withSlow.contributions, `w${i} contributions`).toBeGreaterThanOrEqual(0.9 * without.contributions);
      expect(withSlow.stalledMs, `w${i} stalled`).toBeLessThanOrEqual(without.stalledMs + 100);
    }
    const hostStates = mixed.host.fragmentStates();
    for (const w of mixed.workers) expect(replicaStates(w.worker)).toEqual(hostStates);
  });
});

import { createRoom, must, replicaStates, type TestRoom } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import { SLOW_FACTOR } from './round-plan.ts';

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

describe('a worker 50× slower than the rest', () => {
  /** Each commit's time from its round's opening, ms, for rounds opened after `fromMs`. */
  const roundTimes = (
    room: TestRoom,
    opens: { at: number; message: { fragment: number; round: number } }[],
    fromMs: number,
  ) => {
    const commits = room.spy(room.hostMember, 'commit');
    return () =>
      commits.flatMap(({ at, message }) => {
        const open = opens.find((o) => o.message.fragment === message.fragment && o.message.round === message.round);
        return open && open.at >= fromMs ? [at - open.at] : [];
      });
  };

  it('is left out of rounds once its pace is measured, with its reason, so rounds are as quick as without it', async () => {
    const RUN_MS = 30_000;
    const mixed = await createRoom({ workers: 3, spec: (i) => ({ computeMsPerStep: i === 2 ? 5_000 : 100 }) });
    const mixedOpens = mixed.spy(mixed.hostMember, 'round-open');
    const mixedTimes = roundTimes(mixed, mixedOpens, 15_000);
    mixed.startAll();
    // while it is still named, its rounds wait for it, and the owners say so
    const waited = new Set<string>();
    for (let t = 250; t <= 15_000; t += 250) {
      await mixed.clock.runAsync({ until: t });
      for (let p = 0; p < 2; p++)
        for (const peer of mixed.host.coordinator.waitingFor(p)?.peers ?? []) waited.add(peer);
    }
    expect([...waited]).toEqual(['w2']);
    await mixed.clock.runAsync({ until: RUN_MS });
    const slow = must(mixed.host.coordinator.members.get('w2'));
    const reason = slow.reason;
    await mixed.finish(RUN_MS);
    const alone = await createRoom({ workers: 2 });
    const aloneOpens = alone.spy(alone.hostMember, 'round-open');
    const aloneTimes = roundTimes(alone, aloneOpens, 15_000);
    alone.startAll();
    await alone.finish(RUN_MS);

    // named in the first rounds (nobody's pace was known), then left out, and told why
    expect(mixedOpens.slice(0, 2).every((o) => o.message.participants.includes('w2'))).toBe(true);
    const late = mixedOpens.filter((o) => o.at >= 15_000);
    expect(late.length).toBeGreaterThanOrEqual(10);
    expect(late.every((o) => !o.message.participants.includes('w2'))).toBe(true);
    expect(reason).toMatch(
      new RegExp(`too slow for rounds: [\\d,]+ tokens/s against [\\d,]+ for the others \\(under 1/${SLOW_FACTOR}\\)`),
    );
    // the rounds of the room with it are as quick, and as many, as those of the room without it
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const withIt = mixedTimes();
    const without = aloneTimes();
    console.log(
      `rounds opened after 15 s: ${withIt.length} with the slow worker, mean ${mean(withIt).toFixed(0)} ms; ` +
        `${without.length} without, mean ${mean(without).toFixed(0)} ms`,
    );
    expect(withIt.length).toBeGreaterThanOrEqual(without.length - 1);
    expect(mean(withIt)).toBeLessThanOrEqual(1.1 * mean(without));
    // it trained on and follows the rounds as a replica
    expect(must(mixed.workers[2]).worker.metrics.innerStep).toBeGreaterThan(3);
    const hostStates = mixed.host.fragmentStates();
    for (const w of mixed.workers) expect(replicaStates(w.worker)).toEqual(hostStates);
  }, 120_000);
});

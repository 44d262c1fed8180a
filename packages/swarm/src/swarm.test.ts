import { createRoom, evaluate, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('a room of 4 workers and a host on the in-memory network', () => {
  it('commits rounds of both fragments, θ_global changes every commit, replicas agree and loss falls', {
    timeout: 120_000,
  }, async () => {
    const room = await createRoom({ workers: 4 });
    const { config, host, workers } = room;
    const initialLoss = await evaluate(config, host.params());
    room.startAll();
    await room.finish(12_000);

    const commits = room.committed();
    for (const p of [0, 1]) {
      const hashes = commits.filter((e) => e.fragment === p).map((e) => (e.event === 'round-committed' ? e.hash : ''));
      expect(hashes.length, `fragment ${p} commits`).toBeGreaterThanOrEqual(3);
      expect(new Set(hashes).size).toBe(hashes.length);
    }
    expect(room.aborted()).toEqual([]);
    const hostStates = host.fragmentStates();
    for (const w of workers) expect(replicaStates(w.worker)).toEqual(hostStates);
    const finalLoss = await evaluate(config, host.params());
    console.log(
      `θ_global validation loss ${initialLoss.toFixed(3)} → ${finalLoss.toFixed(3)}; ${commits.length} commits`,
    );
    expect(finalLoss).toBeLessThan(initialLoss - 1);
  });
});

/**
 * A worker's step pipeline in a room on the simulator's clock: workers whose engines queue their
 * steps (queuedEngine) train the same steps, keep, contribute and merge at the same boundaries as
 * workers that await every step, so θ_local, θ_global and the counters come out bitwise the same,
 * with τ > 0 (a boundary's reads overlap the next step) and with τ = 0 (every contribution waits
 * for its round before the next step).
 */

import { createRoom, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

async function run(queued: boolean, overlap: number) {
  const room = await createRoom({ workers: 2, diloco: { overlap }, spec: () => ({ queued }) });
  room.startAll();
  await room.finish(4_000);
  return {
    commits: room.committed().length,
    states: room.workers.map((w) => replicaStates(w.worker)),
    locals: await Promise.all(room.workers.map((w) => room.localParams(w))),
    counters: room.workers.map(({ worker: { metrics: m } }) => [m.innerStep, m.contributions, m.merges, m.stalls]),
    queued: room.workers.map((w) => w.worker.queue !== null),
  };
}

describe('the step pipeline in a room', () => {
  for (const overlap of [2, 0]) {
    it(`trains, contributes and merges as the awaited loop does, bitwise (τ = ${overlap})`, {
      timeout: 60_000,
    }, async () => {
      const [awaited, queued] = [await run(false, overlap), await run(true, overlap)];
      expect(queued.queued).toEqual([true, true]);
      expect(awaited.queued).toEqual([false, false]);
      expect(awaited.commits).toBeGreaterThanOrEqual(4);
      expect(queued.commits).toBe(awaited.commits);
      expect(queued.states).toEqual(awaited.states);
      expect(queued.counters).toEqual(awaited.counters);
      for (const [i, local] of queued.locals.entries()) {
        expect(Buffer.from(local.buffer).equals(Buffer.from((awaited.locals[i] as Float32Array).buffer))).toBe(true);
      }
    });
  }
});

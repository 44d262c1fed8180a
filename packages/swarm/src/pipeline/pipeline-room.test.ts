import { buildLayout, initParameters } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { createRoom, evaluate, must } from '../test-room.ts';
import type { MeshStageTrainer } from './mesh-stage.ts';

const pipeline = { stages: 2, micros: 2, schedule: '1f1b', activations: 'f32' } as const;

describe('a pipeline-parallel room on the simulated mesh', () => {
  it('forms two groups of two stages, syncs each stage across groups, and trains', async () => {
    const room = await createRoom({ workers: 4, pipeline, spec: () => ({ computeMsPerStep: 20 }) });
    const opens = room.spy(room.hostMember, 'round-open');
    room.startAll();
    await room.finish(8_000);
    const places = room.workers.map((w) => (w.worker as unknown as { trainer: MeshStageTrainer }).trainer?.place);
    expect(places.map((p) => p && [p.group, p.stage])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    // fragment p is nano's block p: stage p holds it, so its rounds name that stage of each group
    for (const p of [0, 1]) {
      const rounds = opens.filter((o) => o.message.fragment === p);
      expect(rounds.length, `rounds of fragment ${p}`).toBeGreaterThanOrEqual(3);
      for (const o of rounds) expect(o.message.participants).toEqual(p === 0 ? ['w0', 'w2'] : ['w1', 'w3']);
    }
    expect(room.committed().length).toBeGreaterThanOrEqual(6);
    expect(room.aborted()).toEqual([]);
    const init = await evaluate(room.config, initParameters(buildLayout(room.config.model), room.config.train.seed));
    const trained = await evaluate(room.config, room.host.params());
    expect(trained).toBeLessThan(init - 0.5);
    const counters = room.workers.map(
      (w) => must((w.worker as unknown as { trainer: MeshStageTrainer }).trainer).counters,
    );
    for (const c of counters) {
      expect(c.steps).toBeGreaterThan(50);
      expect(c.refused).toBe(0);
    }
  }, 120_000);
});

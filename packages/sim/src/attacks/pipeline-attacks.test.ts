/**
 * A peer outside a stage's group once got 16 activations of the run's largest
 * message kept (version 1,000 ahead, no sender, size or version check) and re-queued on every
 * roster change. Stopped means the stage keeps no more than two steps of its own neighbour's
 * activations, and refuses the rest.
 */

import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { PIPELINE_ATTACKS, pipelinedConfig } from './pipeline-attacks.ts';

// the attack room's run (attacks/room.ts roomConfig): nano, batch 4, T 64
const roomRun = createRunConfig({ preset: 'nano', train: { batchSize: 4, seqLen: 64 }, diloco: { fragments: 2 } });

describe('a pipeline neighbour pinning memory', () => {
  it('is a probe of the memory family', () => {
    expect(PIPELINE_ATTACKS.map((a) => [a.name, a.family, Boolean(a.probe), Boolean(a.install)])).toEqual([
      ['pipeline-neighbour-pins-memory', 'memory', true, false],
    ]);
  });

  it('is stopped: the stage holds at most two steps of its neighbour activations, and refuses the rest', () => {
    const config = pipelinedConfig(roomRun);
    const { micros } = config.pipeline as NonNullable<typeof config.pipeline>;
    const rows = (4 / micros) * 64;
    const actBytes = rows * (4 * 64 + 4); // B/M × T × (C f32 values + an int32 target)
    const probe = PIPELINE_ATTACKS[0]?.probe;
    if (!probe) throw new Error('the attack has no probe');
    const outcome = probe(roomRun);
    expect(outcome.bytesHeld).toBeLessThanOrEqual(2 * micros * actBytes);
    // the 20 of the flood, the stranger's 20 right-sized ones, and the neighbour's beyond its budget
    expect(outcome.refusals).toBeGreaterThanOrEqual(40);
  });
});

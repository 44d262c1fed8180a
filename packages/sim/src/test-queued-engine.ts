/**
 * For the swarm's tests: a CPU engine posing as one that queues its steps (a GPU's), so that a
 * worker on the simulator's clock runs its step pipeline (step-pipeline.ts) on it. Its steps are
 * computed when submitted and handed back through the clock as tracked work, so the run stays
 * deterministic; what a GPU's queue order adds is step-pipeline.test.ts's part.
 */
import { QueueMeter, type Trainer } from '@shoal/model';
import type { VirtualClock } from './index.ts';

export function queuedEngine(trainer: Trainer, clock: VirtualClock): Trainer {
  const queue = new QueueMeter(() => clock.now());
  const { readRanges, writeRanges } = trainer;
  return {
    backend: 'webgpu',
    layout: trainer.layout,
    train: trainer.train,
    queue,
    step(batch, lr) {
      const done = clock.track(trainer.step(batch, lr));
      queue.submitted(done);
      return done;
    },
    evaluate: (batches) => trainer.evaluate(batches),
    getParams: () => trainer.getParams(),
    setParams: (params) => trainer.setParams(params),
    ...(readRanges && { readRanges: (ranges, out) => readRanges.call(trainer, ranges, out) }),
    ...(writeRanges && { writeRanges: (ranges, values) => writeRanges.call(trainer, ranges, values) }),
    getOptimizerState: () => trainer.getOptimizerState(),
    setOptimizerState: (state) => trainer.setOptimizerState(state),
    destroy: () => trainer.destroy(),
  };
}

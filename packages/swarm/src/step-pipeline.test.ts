/**
 * The step pipeline on a real WebGPU engine (lavapipe without a GPU; no adapter fails, never
 * skips): a scripted run of boundaries (reads of a fragment with CPU work after them, merges
 * written between two steps, waits) gives bitwise the parameters and reads of the loop that awaits
 * every step, while the steps after each read really are queued before its CPU work.
 */
import { buildFragments, type Fragment } from '@shoal/diloco';
import { mulberry32 } from '@shoal/gpu';
import { useGpu } from '@shoal/gpu/test-gpu';
import {
  type Batch,
  buildLayout,
  createGptKernels,
  defaultTrainConfig,
  type GptConfig,
  GpuTrainer,
  initParameters,
} from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { stepPipelineFor } from './step-pipeline.ts';

const gpu = useGpu();

const config: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 64 };
const train = defaultTrainConfig({ batchSize: 2, seqLen: 16, maxLr: 3e-3, seed: 1 });
const STEPS = 14;
/** CPU work after a boundary's read (a contribution's Δ and encoding), ms. */
const WORK_MS = 15;

function batches(count: number): Batch[] {
  const next = mulberry32(5);
  const tokens = () =>
    Int32Array.from({ length: train.batchSize * train.seqLen }, () => Math.floor(next() * config.vocabSize));
  return Array.from({ length: count }, () => ({ inputs: tokens(), targets: tokens() }));
}

/** What a boundary does before step n + 1 (after n steps): a fixed script across both loops. */
function kindOf(n: number): 'read' | 'merge' | 'wait' | 'none' {
  if (n % 4 === 2) return 'read';
  if (n % 4 === 0 && n > 0) return 'merge';
  return n % 4 === 3 ? 'wait' : 'none';
}

interface Run {
  params: Float32Array;
  reads: Float32Array[];
  /** Per read, whether the next step was queued before its CPU work began. */
  queuedBeforeWork: boolean[];
  fraction: number;
  steps: number;
}

/**
 * Trains STEPS steps through boundaries that a fake round machinery scripts: `depth` 1 awaits each
 * step's loss and each boundary in full; otherwise StepPipeline.step runs the loop.
 */
async function run(device: GPUDevice, depth: number): Promise<Run> {
  const layout = buildLayout(config);
  const fragments = buildFragments(layout, 2, 'sequential');
  const kernels = await createGptKernels(device, config.nEmbd / config.nHead);
  const trainer = await GpuTrainer.create(device, config, train, initParameters(layout, 3), kernels);
  const readFragment = async (f: Fragment) => {
    const out = new Float32Array(f.size);
    await trainer.readRanges(f.ranges, out);
    return out;
  };
  const reads: Float32Array[] = [];
  const queuedBeforeWork: boolean[] = [];
  let counted = 0;
  let submitted = 0;
  const boundary = async (overlap?: () => void) => {
    const n = counted;
    const fragment = fragments[n % 2] as Fragment;
    const kind = kindOf(n);
    if (kind === 'merge') {
      // θ_local[p] ← ½·θ_local[p] + ½·(a fixed θ_global): written before the next step
      const local = await readFragment(fragment);
      for (let i = 0; i < local.length; i++) local[i] = 0.5 * (local[i] as number) + 0.5 * Math.sin(i);
      await trainer.writeRanges(fragment.ranges, local);
    }
    if (kind === 'read') {
      const reading = readFragment(fragment);
      overlap?.();
      const values = await reading;
      queuedBeforeWork.push(submitted > n);
      const until = performance.now() + WORK_MS;
      while (performance.now() < until) {} // the round's CPU work, with the engine busy or idle
      reads.push(values);
      return;
    }
    if (kind === 'wait') await new Promise((resolve) => setTimeout(resolve, WORK_MS));
    else overlap?.();
  };
  const all = batches(STEPS);
  const lr = (n: number) => (train.maxLr * (n + 1)) / STEPS;
  trainer.queue.reset();
  try {
    const pipeline = stepPipelineFor(trainer, depth, () => {});
    if (!pipeline) {
      for (; counted < STEPS; counted++) {
        await boundary();
        submitted++;
        await trainer.step(all[counted] as Batch, lr(counted));
      }
    }
    while (pipeline && counted < STEPS) {
      await pipeline.step({
        boundary,
        waitForRounds: async () => {},
        next: () => {
          submitted++;
          return { batch: all[counted] as Batch, lr: lr(counted) };
        },
        counted: () => {
          counted++;
        },
        restAfter: () => 0,
        sleep: () => Promise.resolve(),
      });
    }
    await pipeline?.drain();
    const { fraction, steps, busyMs, wallMs, inFlight } = trainer.queue.stats();
    expect(inFlight).toBe(0);
    expect(busyMs).toBeLessThanOrEqual(wallMs);
    return { params: await trainer.getParams(), reads, queuedBeforeWork, fraction, steps };
  } finally {
    trainer.destroy();
  }
}

/** The first index where two vectors differ bitwise, or -1. */
function firstDifference(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  const [x, y] = [new Uint32Array(a.buffer, a.byteOffset, a.length), new Uint32Array(b.buffer, b.byteOffset, b.length)];
  return x.findIndex((bits, i) => bits !== y[i]);
}

describe('StepPipeline on WebGPU', () => {
  it('keeps steps queued through boundaries and gives the parameters of the awaited loop bitwise', {
    timeout: 60_000,
  }, async () => {
    const { device } = gpu();
    const awaited = await run(device, 1);
    const pipelined = await run(device, 3);
    expect(firstDifference(pipelined.params, awaited.params)).toBe(-1);
    expect(pipelined.reads.length).toBe(awaited.reads.length);
    for (const [i, read] of pipelined.reads.entries()) {
      expect(firstDifference(read, awaited.reads[i] as Float32Array), `read ${i}`).toBe(-1);
    }
    // the overlap happened: the next step was queued before each read's CPU work
    expect(pipelined.queuedBeforeWork.every(Boolean)).toBe(true);
    expect(awaited.queuedBeforeWork.some(Boolean)).toBe(false);
    for (const { fraction, steps } of [awaited, pipelined]) {
      expect(steps).toBe(STEPS);
      expect(fraction).toBeGreaterThan(0);
      expect(fraction).toBeLessThanOrEqual(1);
    }
  });
});

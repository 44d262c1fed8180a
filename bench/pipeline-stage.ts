/**
 * One pipeline stage in a worker thread, for bench/pipeline.ts: a CpuStageTrainer that runs its
 * schedule's ops (`scheduleOrder`) on each step, taking activations from the previous stage's port
 * and gradients from the next stage's, and sending its own the other way. The step's end (tied wte
 * gradient, global norm, AdamW)
 * goes through the main thread, which plays the part of the stages' all-reduce. Values cross a
 * link as MeshStageTrainer sends them over the mesh (packages/swarm/src/pipeline/wire-values.ts:
 * f32 little-endian, or bf16 rounded to nearest even), in a transferred ArrayBuffer.
 *
 * Started through pipeline-worker.mjs (which registers tsx); the main thread talks to it with
 * `StageRequest`s and gets `StageReply`s back, one reply per request.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import type { GptConfig } from '../packages/model/src/config.ts';
import type { PipelineOp } from '../packages/model/src/pipeline/schedule.ts';
import { CpuStageTrainer } from '../packages/model/src/pipeline/stage-trainer.ts';
import type { StageSpec } from '../packages/model/src/pipeline/stages.ts';
import type { TrainConfig } from '../packages/model/src/train-config.ts';
import { bytesPerValue, readValues, writeValues } from '../packages/swarm/src/pipeline/wire-values.ts';

export type ActivationType = 'f32' | 'bf16';

export interface StageWorkerData {
  config: GptConfig;
  train: TrainConfig;
  spec: StageSpec;
  params: Float32Array;
  microBatch: number;
  micros: number;
  /** This stage's ops in schedule order. */
  order: PipelineOp[];
  activations: ActivationType;
  /** To stage s−1 (absent on the first stage), to stage s+1 (absent on the last). */
  prev?: MessagePort;
  next?: MessagePort;
}

/** A whole batch (micros × microBatch rows); each stage takes the rows it needs. */
export type StageRequest =
  | { type: 'step'; inputs: Int32Array; targets: Int32Array }
  /** The summed tied gradient for the first and last stage (S ≥ 2), null for the others. */
  | { type: 'tied'; grad: Float32Array | null }
  | { type: 'update'; lr: number; gradScale: number }
  | { type: 'eval'; inputs: Int32Array; targets: Int32Array };

/** Milliseconds this step: forward and backward compute, bf16/copy codec, the step's end. */
export interface StageTimes {
  forwardMs: number;
  backwardMs: number;
  codecMs: number;
  optimizerMs: number;
  /** Waiting on a neighbour's message (the bubble, as this stage sees it). */
  waitMs: number;
}

export type StageReply =
  /** After the step's ops: the tied wte gradient (first and last stage of S ≥ 2), else null. */
  | { type: 'ops-done'; tiedGrad: Float32Array | null }
  | { type: 'sum-squares'; sumSquares: number }
  | { type: 'updated'; loss: number; times: StageTimes; sentBytes: number; peakInFlight: number }
  | { type: 'eval-done'; loss: number };

/** Activations (or their gradient) for one micro-batch, as they cross a link. */
interface Wire {
  micro: number;
  /** The values as wire bytes, `activations` wide. */
  bytes: Uint8Array;
}

/** Messages from one port, in arrival order, taken one at a time. */
class Inbox {
  private readonly items: Wire[] = [];
  private waiting: ((item: Wire) => void) | null = null;

  constructor(port: MessagePort) {
    port.on('message', (item: Wire) => {
      const waiting = this.waiting;
      this.waiting = null;
      if (waiting) waiting(item);
      else this.items.push(item);
    });
  }

  /** The next message, which must be micro-batch `micro`'s: a neighbour sends in its op order. */
  async take(micro: number): Promise<Wire> {
    const item = this.items.shift() ?? (await new Promise<Wire>((resolve) => (this.waiting = resolve)));
    if (item.micro !== micro) throw new Error(`expected micro-batch ${micro}, got ${item.micro}`);
    return item;
  }
}

const data = workerData as StageWorkerData;
const { spec, microBatch, micros, order, activations } = data;
const parent = parentPort as NonNullable<typeof parentPort>;
// GPipe holds all M micro-batches; 1F1B at most S − s (scheduleOrder's warm-up + 1).
let slots = 0;
{
  let inFlight = 0;
  for (const op of order) {
    inFlight += op.kind === 'F' ? 1 : -1;
    slots = Math.max(slots, inFlight);
  }
}
const trainer = new CpuStageTrainer(data.train, spec, data.params, data.config, { microBatch, slots });
const fromPrev = data.prev ? new Inbox(data.prev) : null;
const fromNext = data.next ? new Inbox(data.next) : null;
const rowTokens = data.train.seqLen;

/** Micro-batch m's rows of a whole batch. */
const rowsOf = (tokens: Int32Array, m: number) =>
  tokens.subarray(m * microBatch * rowTokens, (m + 1) * microBatch * rowTokens);

/** Wire bytes of `values` (a copy: the model's output lives in its activation memory until the slot's next pass). */
function encode(values: Float32Array): Uint8Array {
  const bytes = new Uint8Array(values.length * bytesPerValue(activations));
  writeValues(values, activations, bytes, 0);
  return bytes;
}

const decode = (bytes: Uint8Array) => readValues(bytes, 0, bytes.length / bytesPerValue(activations), activations);

let times: StageTimes = { forwardMs: 0, backwardMs: 0, codecMs: 0, optimizerMs: 0, waitMs: 0 };
let sentBytes = 0;
let stepLoss = 0;
let peakInFlight = 0;

/** Runs `work`, adding its milliseconds to `field`. */
async function timed<T>(field: keyof StageTimes, work: () => T | Promise<T>): Promise<T> {
  const start = performance.now();
  const result = await work();
  times[field] += performance.now() - start;
  return result;
}

function send(port: MessagePort | undefined, micro: number, bytes: Uint8Array): void {
  if (!port) throw new Error(`stage ${spec.index} has no neighbour to send to`);
  sentBytes += bytes.byteLength;
  port.postMessage({ micro, bytes } satisfies Wire, [bytes.buffer as ArrayBuffer]);
}

async function forward(op: PipelineOp, slot: number, inputs: Int32Array, targets: Int32Array): Promise<number> {
  let input: Int32Array | Float32Array = rowsOf(inputs, op.micro);
  if (fromPrev) {
    const wire = await timed('waitMs', () => fromPrev.take(op.micro));
    input = await timed('codecMs', () => decode(wire.bytes));
  }
  const out = await timed('forwardMs', () =>
    trainer.forward(slot, input, spec.head ? rowsOf(targets, op.micro) : null),
  );
  if (typeof out === 'number') return out;
  send(data.next, op.micro, await timed('codecMs', () => encode(out)));
  return 0;
}

async function runStep(inputs: Int32Array, targets: Int32Array): Promise<Float32Array | null> {
  times = { forwardMs: 0, backwardMs: 0, codecMs: 0, optimizerMs: 0, waitMs: 0 };
  sentBytes = 0;
  stepLoss = 0;
  const slotOf = (micro: number) => micro % slots;
  let inFlight = 0;
  peakInFlight = 0;
  for (const op of order) {
    if (op.kind === 'F') {
      stepLoss += await forward(op, slotOf(op.micro), inputs, targets);
      peakInFlight = Math.max(peakInFlight, ++inFlight);
      continue;
    }
    inFlight--;
    let dOutput: Float32Array | null = null;
    if (fromNext) {
      const wire = await timed('waitMs', () => fromNext.take(op.micro));
      dOutput = await timed('codecMs', () => decode(wire.bytes));
    }
    const dInput = await timed('backwardMs', () => trainer.backward(slotOf(op.micro), dOutput, op.micro > 0));
    if (dInput) send(data.prev, op.micro, await timed('codecMs', () => encode(dInput)));
  }
  return timed('optimizerMs', () => trainer.tiedGrad());
}

/** Forward only, micro-batch by micro-batch (slot 0): the mean loss on the last stage. */
async function runEval(inputs: Int32Array, targets: Int32Array): Promise<number> {
  let loss = 0;
  for (let m = 0; m < micros; m++)
    loss += await forward({ stage: spec.index, micro: m, kind: 'F' }, 0, inputs, targets);
  return loss / micros;
}

function reply(message: StageReply): void {
  parent.postMessage(message);
}

let queue = Promise.resolve();
parent.on('message', (request: StageRequest) => {
  // One request at a time, in arrival order.
  queue = queue.then(async () => {
    switch (request.type) {
      case 'step':
        reply({ type: 'ops-done', tiedGrad: await runStep(request.inputs, request.targets) });
        break;
      case 'tied':
        if (request.grad) await timed('optimizerMs', () => trainer.setTiedGrad(request.grad as Float32Array));
        reply({ type: 'sum-squares', sumSquares: await timed('optimizerMs', () => trainer.gradSumSquares()) });
        break;
      case 'update':
        await timed('optimizerMs', () => trainer.update(request.lr, request.gradScale));
        reply({ type: 'updated', loss: stepLoss / micros, times, sentBytes, peakInFlight });
        break;
      case 'eval':
        reply({ type: 'eval-done', loss: await runEval(request.inputs, request.targets) });
        break;
    }
  });
  queue.catch((error: unknown) => {
    // Let the main thread see it as the worker's 'error' event.
    setImmediate(() => {
      throw error;
    });
  });
});

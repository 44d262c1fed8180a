// Deterministic batches. Training rows are windows of seqLen + 1 bytes at offsets drawn from a
// counter-based RNG keyed by (seed, worker, batch index, row): the same seed and worker give
// the same batches on every machine, in the browser and in Node, and a resumed run continues
// exactly from its position. Validation uses fixed, evenly spaced windows independent of any
// seed, so every method and every run is scored on the same bytes.

import { assertInteger, hashWords, uniformIndex, wordsOf } from './hash.ts';

/** Row-major [batchSize, seqLen] token ids; targets[b, t] is the byte after inputs[b, t]. */
export interface Batch {
  inputs: Int32Array;
  targets: Int32Array;
}

export interface BatchShape {
  batchSize: number;
  seqLen: number;
}

export interface BatchSamplerOptions extends BatchShape {
  /** Non-negative integer; the room's data seed. */
  seed: number;
  /** This worker's index: folded into the stream key so workers draw different windows. */
  worker?: number;
}

/** What a checkpoint stores to resume a sampler: its identity and how many batches it drew. */
export interface SamplerState extends BatchShape {
  seed: number;
  worker: number;
  /** Batches drawn so far. */
  position: number;
}

// Separates this use of the hash from any other keyed by the same numbers.
const TRAIN_STREAM_DOMAIN = 0x5348_4f41; // 'SHOA'

function checkShape({ batchSize, seqLen }: BatchShape): void {
  assertInteger('batchSize', batchSize, 1);
  assertInteger('seqLen', seqLen, 1);
}

function checkFits(tokens: Uint8Array, seqLen: number, what: string): void {
  if (tokens.length < seqLen + 1) {
    throw new RangeError(
      `${what} has ${tokens.length} bytes, fewer than one window of seqLen + 1 = ${seqLen + 1}: use a larger text or a shorter seqLen`,
    );
  }
}

/** Copies the windows starting at `offsets` into a batch. */
export function fillBatch(tokens: Uint8Array, offsets: readonly number[], seqLen: number): Batch {
  const inputs = new Int32Array(offsets.length * seqLen);
  const targets = new Int32Array(offsets.length * seqLen);
  offsets.forEach((offset, row) => {
    const base = row * seqLen;
    for (let t = 0; t < seqLen; t++) {
      inputs[base + t] = tokens[offset + t] as number;
      targets[base + t] = tokens[offset + t + 1] as number;
    }
  });
  return { inputs, targets };
}

export class BatchSampler {
  readonly batchSize: number;
  readonly seqLen: number;
  readonly seed: number;
  readonly worker: number;
  readonly #tokens: Uint8Array;
  readonly #streamKey: number;
  /** Distinct window offsets: 0 … length − seqLen − 1. */
  readonly #offsetCount: number;
  #position = 0;

  constructor(tokens: Uint8Array, { batchSize, seqLen, seed, worker = 0 }: BatchSamplerOptions) {
    checkShape({ batchSize, seqLen });
    assertInteger('seed', seed, 0);
    assertInteger('worker', worker, 0);
    checkFits(tokens, seqLen, 'the training split');
    this.batchSize = batchSize;
    this.seqLen = seqLen;
    this.seed = seed;
    this.worker = worker;
    this.#tokens = tokens;
    this.#streamKey = hashWords([TRAIN_STREAM_DOMAIN, ...wordsOf(seed), ...wordsOf(worker)]);
    this.#offsetCount = tokens.length - seqLen;
  }

  /** Batches drawn so far; the next call to next() draws batch number `position`. */
  get position(): number {
    return this.#position;
  }

  /** Window offsets of batch `index` (by default the next one), without drawing it. */
  offsets(index: number = this.#position): number[] {
    assertInteger('batch index', index, 0);
    const [low, high] = wordsOf(index);
    const offsets: number[] = [];
    for (let row = 0; row < this.batchSize; row++) {
      offsets.push(uniformIndex([this.#streamKey, low, high, row], this.#offsetCount));
    }
    return offsets;
  }

  next(): Batch {
    const batch = fillBatch(this.#tokens, this.offsets(this.#position), this.seqLen);
    this.#position++;
    return batch;
  }

  getState(): SamplerState {
    const { batchSize, seqLen, seed, worker } = this;
    return { batchSize, seqLen, seed, worker, position: this.#position };
  }

  /** Resumes from a checkpoint; a state from another seed, worker or shape is refused. */
  setState(state: SamplerState): void {
    const mine = this.getState();
    for (const key of ['seed', 'worker', 'batchSize', 'seqLen'] as const) {
      if (state[key] !== mine[key]) {
        throw new Error(
          `sampler state has ${key} ${state[key]}, this sampler has ${mine[key]} ` +
            `(state: seed ${state.seed}, worker ${state.worker}, batchSize ${state.batchSize}, seqLen ${state.seqLen})`,
        );
      }
    }
    assertInteger('sampler position', state.position, 0);
    this.#position = state.position;
  }
}

export interface ValidationOptions extends BatchShape {
  /** Number of batches. */
  count: number;
}

/**
 * `count` batches of evenly spaced windows over the validation split, the first at offset 0 and
 * the last ending at the split's last byte. No seed: the same windows for every run and method.
 */
export function validationBatches(validation: Uint8Array, { batchSize, seqLen, count }: ValidationOptions): Batch[] {
  checkShape({ batchSize, seqLen });
  assertInteger('count', count, 1);
  checkFits(validation, seqLen, 'the validation split');
  const windows = count * batchSize;
  const lastOffset = validation.length - seqLen - 1;
  const batches: Batch[] = [];
  for (let b = 0; b < count; b++) {
    const offsets: number[] = [];
    for (let row = 0; row < batchSize; row++) {
      const i = b * batchSize + row;
      offsets.push(windows === 1 ? 0 : Math.floor((i * lastOffset) / (windows - 1)));
    }
    batches.push(fillBatch(validation, offsets, seqLen));
  }
  return batches;
}

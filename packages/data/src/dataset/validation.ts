// The room's validation sample: evenly spaced windows over the validation shards, seed-free,
// so every member and every method is scored on the same bytes. Windows never cross a shard
// boundary; only the shards that hold a window are read, one at a time.

import { assertInteger } from '../hash.ts';
import type { Batch, BatchShape } from '../sampler.ts';
import type { Dataset } from './dataset.ts';
import type { ShardEntry } from './manifest.ts';

export interface ValidationSampleOptions extends BatchShape {
  /** About this many tokens in all (at least one batch). */
  budgetBytes: number;
}

/** Window start positions: `windows` evenly spaced over the shards' usable offsets, as [shard, offset]. */
export function validationWindows(
  shardBytes: readonly number[],
  seqLen: number,
  windows: number,
): Array<{ shard: number; offset: number }> {
  // A window of seqLen + 1 bytes starts at 0 … bytes − seqLen − 1 within its shard.
  const usable = shardBytes.map((bytes) => Math.max(0, bytes - seqLen));
  const total = usable.reduce((sum, n) => sum + n, 0);
  if (total === 0) {
    throw new RangeError(`no validation shard holds one window of seqLen + 1 = ${seqLen + 1} bytes`);
  }
  const result: Array<{ shard: number; offset: number }> = [];
  let shard = 0;
  let before = 0; // usable offsets in shards before `shard`
  for (let k = 0; k < windows; k++) {
    const position = windows === 1 ? 0 : Math.floor((k * (total - 1)) / (windows - 1));
    while (position >= before + (usable[shard] as number)) before += usable[shard++] as number;
    result.push({ shard, offset: position - before });
  }
  return result;
}

export async function validationSample(
  dataset: Dataset,
  { batchSize, seqLen, budgetBytes }: ValidationSampleOptions,
): Promise<Batch[]> {
  assertInteger('batchSize', batchSize, 1);
  assertInteger('seqLen', seqLen, 1);
  const shards = dataset.loaded.validation;
  const count = Math.max(1, Math.floor(budgetBytes / (batchSize * seqLen)));
  const windows = validationWindows(
    shards.map((shard) => shard.bytes),
    seqLen,
    count * batchSize,
  );
  const inputs = Array.from({ length: count }, () => new Int32Array(batchSize * seqLen));
  const targets = Array.from({ length: count }, () => new Int32Array(batchSize * seqLen));
  // One validation shard in memory at a time: windows come in shard order.
  let heldShard = -1;
  let held: Uint8Array = new Uint8Array(0);
  for (const [k, { shard, offset }] of windows.entries()) {
    if (heldShard !== shard) {
      held = await dataset.shard(shards[shard] as ShardEntry);
      heldShard = shard;
    }
    const batch = Math.floor(k / batchSize);
    const base = (k % batchSize) * seqLen;
    const into = inputs[batch] as Int32Array;
    const next = targets[batch] as Int32Array;
    for (let t = 0; t < seqLen; t++) {
      into[base + t] = held[offset + t] as number;
      next[base + t] = held[offset + t + 1] as number;
    }
  }
  return inputs.map((batchInputs, b) => ({ inputs: batchInputs, targets: targets[b] as Int32Array }));
}

/**
 * What the WebGPU engine needs on a device to train a model on B×T batches, counted from the
 * buffers it allocates (no device needed), and whether an adapter's limits let it: checked before
 * any kernel is compiled or buffer made, so a volunteer whose GPU cannot hold the room's model is
 * told so in one line instead of failing in a dispatch or losing its device.
 *
 *   parameters   params, grads, AdamW m and v: four buffers of the padded layout
 *   activations  the activation arena and the activation-gradient arena (buffers.ts)
 * Kernel scratch (a split matmul's partial sums), staging buffers and the batch's tokens are a
 * few MiB beside these and are not counted.
 */
import type { GptConfig } from '../config.ts';
import { buildLayout } from '../layout.ts';
import { formatMemory } from '../pipeline/memory.ts';
import { activationTensors } from './buffers.ts';

const FLOAT_BYTES = 4;
/** The arena's own cap on one buffer (arena.ts): a tensor must fit one. */
const ARENA_BUFFER_BYTES = 1 << 30;

export interface GpuMemory {
  /** params + grads + AdamW m + v. */
  parameterBytes: number;
  /** Activations and their gradients. */
  activationBytes: number;
  total: number;
  /** The largest single tensor of the arenas, bytes (it must fit one binding). */
  largestTensorBytes: number;
  /** Its name, for the message. */
  largestTensor: string;
}

export interface GpuMemoryLimits {
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
}

/** The bytes the WebGPU engine allocates to train `config` on B×T batches, by part. */
export function gpuTrainingMemory(config: GptConfig, B: number, T: number): GpuMemory {
  const parameterBytes = 4 * FLOAT_BYTES * buildLayout(config).paddedSize;
  const { acts, dacts } = activationTensors(config, B, T);
  let activationBytes = 0;
  let largest: [string, number] = ['', 0];
  for (const tensor of [...acts, ...dacts]) {
    activationBytes += FLOAT_BYTES * tensor[1];
    if (tensor[1] > largest[1]) largest = tensor;
  }
  return {
    parameterBytes,
    activationBytes,
    total: parameterBytes + activationBytes,
    largestTensorBytes: FLOAT_BYTES * largest[1],
    largestTensor: largest[0],
  };
}

/**
 * Why this adapter cannot train `config` on B×T batches, or null when its limits allow it: the
 * parameter buffer within maxBufferSize, every activation tensor within one binding, and the
 * whole within `lendableBytes` when the volunteer says what it lends.
 */
export function gpuFitProblem(
  config: GptConfig,
  B: number,
  T: number,
  limits: GpuMemoryLimits,
  lendableBytes?: number,
): string | null {
  const need = gpuTrainingMemory(config, B, T);
  const shape = `${formatMemory(need.total)} for ${formatParameters(config)} at batch ${B} × ${T}`;
  const paramBuffer = need.parameterBytes / 4;
  if (paramBuffer > limits.maxBufferSize) {
    return `the model needs ${shape}; its parameters need one ${formatMemory(paramBuffer)} buffer and this adapter allows ${formatMemory(limits.maxBufferSize)}`;
  }
  const binding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize, ARENA_BUFFER_BYTES);
  if (need.largestTensorBytes > binding) {
    return `the model needs ${shape}; its ${need.largestTensor} activations need ${formatMemory(need.largestTensorBytes)} in one binding and this adapter allows ${formatMemory(binding)} (use a smaller batch or sequence)`;
  }
  if (lendableBytes !== undefined && need.total > lendableBytes) {
    return `the model needs ${shape}; this volunteer lends ${formatMemory(lendableBytes)} (use a smaller batch or sequence)`;
  }
  return null;
}

/** Throws `gpuFitProblem`'s reason as a RangeError when there is one. */
export function assertGpuFits(
  config: GptConfig,
  B: number,
  T: number,
  limits: GpuMemoryLimits,
  lendableBytes?: number,
): void {
  const problem = gpuFitProblem(config, B, T, limits, lendableBytes);
  if (problem) throw new RangeError(`This GPU cannot train the room's model: ${problem}.`);
}

function formatParameters(config: GptConfig): string {
  const n = buildLayout(config).size;
  return `${(n / 1e6).toFixed(n < 1e6 ? 2 : 1)}M parameters`;
}

/**
 * The convention every kernel family follows, so the model can build a whole training step once
 * and replay it: a family compiles its pipelines once (`static async create(device)`), and for
 * each concrete use (these buffers, this shape) returns a BoundKernel whose bind groups and
 * uniforms are made once. A step is then a list of BoundKernels dispatched into compute passes,
 * with no allocation and no CPU readback.
 *
 * Tensors are views into larger buffers (the model keeps all parameters in one flat buffer):
 * a TensorView is a GPUBufferBinding, whose offset must be a multiple of
 * device.limits.minStorageBufferOffsetAlignment (256 bytes; the model's layout aligns to that).
 *
 * Binding rules Dawn enforces (found the hard way): within one dispatch a buffer may not be bound
 * both read-only and writable, even at disjoint ranges, so kernels that take views of the shared
 * flat buffers declare every storage binding `read_write`; and writable views must not overlap
 * other views of the same buffer, so views are narrowed to exactly their tensor's size.
 *
 * Gradient semantics, as in llm.c: every backward kernel ADDS into its gradient outputs
 * (dinp += …, dweight += …); the model zeroes gradient buffers at the start of a step.
 */
import { createUniformBuffer } from './buffers.ts';

export type TensorView = GPUBufferBinding;

export interface BoundKernel {
  readonly label: string;
  /** Records this kernel's dispatch(es) into an open compute pass. */
  dispatch(pass: GPUComputePassEncoder): void;
  /** Frees what the binding created (uniform buffers), not the tensors it reads and writes. */
  destroy(): void;
}

/**
 * One pipeline, one bind group with explicit binding numbers, an optional uniform of u32 words,
 * a grid. Explicit numbers let a family keep all its entry points in one .wgsl module, declaring
 * each resource once; an entry point's 'auto' layout then holds only the subset it uses.
 */
export function bindSparse(
  device: GPUDevice,
  label: string,
  pipeline: GPUComputePipeline,
  tensors: ReadonlyArray<readonly [binding: number, view: TensorView]>,
  uniform: readonly [binding: number, words: number[]] | null,
  workgroups: [number, number?, number?],
): BoundKernel {
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  if (workgroups.some((n) => n !== undefined && (n < 1 || n > limit || !Number.isInteger(n)))) {
    throw new RangeError(`${label}: workgroup grid ${workgroups.join('×')} outside 1…${limit} per dimension`);
  }
  const params = uniform ? createUniformBuffer(device, `${label}.params`, uniform[1]) : null;
  const entries: GPUBindGroupEntry[] = tensors.map(([binding, resource]) => ({ binding, resource }));
  if (uniform && params) entries.push({ binding: uniform[0], resource: { buffer: params } });
  const bindGroup = device.createBindGroup({
    label: `${label}.bindGroup`,
    layout: pipeline.getBindGroupLayout(0),
    entries,
  });
  const [x, y = 1, z = 1] = workgroups;
  return {
    label,
    dispatch(pass) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(x, y, z);
    },
    destroy() {
      params?.destroy();
    },
  };
}

/** The dense case of bindSparse: tensors at bindings 0…n−1, the uniform (if any) at n. */
export function bindKernel(
  device: GPUDevice,
  label: string,
  pipeline: GPUComputePipeline,
  tensors: TensorView[],
  uniformWords: number[] | null,
  workgroups: [number, number?, number?],
): BoundKernel {
  const numbered = tensors.map((view, binding) => [binding, view] as const);
  return bindSparse(
    device,
    label,
    pipeline,
    numbered,
    uniformWords ? [tensors.length, uniformWords] : null,
    workgroups,
  );
}

/**
 * A 2D grid of at least `groups` workgroups with x within the per-dimension limit, for element-wise
 * work past 65535 workgroups; WGSL reads it back as `group.y · groups.x + group.x`.
 */
export function workgroupGrid(device: GPUDevice, groups: number): [number, number] {
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  const x = Math.max(1, Math.min(groups, limit));
  const y = Math.max(1, Math.ceil(groups / x));
  if (y > limit) throw new RangeError(`workgroupGrid: ${groups} workgroups exceed ${limit}² (split the work)`);
  return [x, y];
}

/** A kernel with nothing to do (an empty tensor), so callers need no special case. */
export function emptyKernel(label: string): BoundKernel {
  return { label, dispatch() {}, destroy() {} };
}

/** Several bound kernels as one, dispatched in order. */
export function sequence(label: string, kernels: BoundKernel[]): BoundKernel {
  return {
    label,
    dispatch(pass) {
      for (const kernel of kernels) kernel.dispatch(pass);
    },
    destroy() {
      for (const kernel of kernels) kernel.destroy();
    },
  };
}

/** Runs bound kernels in one compute pass (storage writes are visible between dispatches) and waits. */
export async function runKernels(device: GPUDevice, kernels: BoundKernel[], label = 'runKernels'): Promise<void> {
  device.pushErrorScope('validation');
  const encoder = device.createCommandEncoder({ label });
  const pass = encoder.beginComputePass({ label });
  for (const kernel of kernels) kernel.dispatch(pass);
  pass.end();
  device.queue.submit([encoder.finish()]);
  const error = await device.popErrorScope();
  if (error) throw new Error(`${label}: ${error.message}`);
  await device.queue.onSubmittedWorkDone();
}

/**
 * Builds GPU objects inside a validation error scope, so a bad binding fails here with its
 * message instead of later in a dispatch. What `build` returns is destroyed if the scope caught
 * an error; an exception from `build` itself is rethrown once the scope is popped.
 */
export async function buildValidated<T extends { destroy(): void }>(
  device: GPUDevice,
  label: string,
  build: () => T,
): Promise<T> {
  device.pushErrorScope('validation');
  let built: T | undefined;
  let failure: unknown;
  try {
    built = build();
  } catch (error) {
    failure = error;
  }
  const error = await device.popErrorScope();
  if (failure) throw failure;
  if (error) {
    built?.destroy();
    throw new Error(`${label}: ${error.message}`);
  }
  return built as T;
}

/** ⌈a / b⌉ for workgroup counts. */
export const ceilDiv = (a: number, b: number) => Math.ceil(a / b);

/** Float arrays the CPU references accept: f64 for the gradient-check reference, f32 for the CPU backend. */
export type FloatArray = Float32Array | Float64Array;

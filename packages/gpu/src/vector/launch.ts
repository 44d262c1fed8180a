/**
 * Binding helpers shared by the element-wise and normalisation families (vector, residual, gelu,
 * embedding, layernorm). They produce kernel.ts BoundKernels; they differ from bindKernel in two
 * ways the families need:
 *
 * - Sparse bindings. A family keeps all its entry points in one .wgsl module, declaring each
 *   resource once with its own binding number; an entry point uses a subset, and its 'auto'
 *   layout holds only that subset. bindKernel numbers tensors 0…n−1, so it cannot express that.
 * - Grids past 65535 workgroups. Element-wise ops run over tens of millions of floats; a 2D grid
 *   (x ≤ maxComputeWorkgroupsPerDimension) is read back in WGSL as `group.y · groups.x + group.x`.
 *
 * (Candidates for kernel.ts once the other families want them.)
 */
import { createUniformBuffer } from '../buffers.ts';
import type { BoundKernel, TensorView } from '../kernel.ts';

/** A 2D grid of at least `groups` workgroups, x within the per-dimension limit. */
export function workgroupGrid(device: GPUDevice, groups: number): [number, number] {
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  const x = Math.max(1, Math.min(groups, limit));
  const y = Math.max(1, Math.ceil(groups / x));
  if (y > limit) throw new RangeError(`workgroupGrid: ${groups} workgroups exceed ${limit}² (split the work)`);
  return [x, y];
}

/** One pipeline, one bind group with explicit binding numbers, a uniform of u32 words, a grid. */
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

/** A kernel with nothing to do (an empty tensor), so callers need no special case. */
export function emptyKernel(label: string): BoundKernel {
  return { label, dispatch() {}, destroy() {} };
}

/**
 * Whether the device runs on a CPU implementation of WebGPU (SwiftShader, lavapipe), where
 * cross-lane work (workgroup barriers, shared-memory reductions) costs far more than on a GPU,
 * so kernels pick other layouts. Reads GPUDevice.adapterInfo; false where a browser lacks it.
 */
export function isSoftwareDevice(device: GPUDevice): boolean {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  if (!info) return false;
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  return /swiftshader|llvmpipe|lavapipe|software|microsoft basic render/.test(text);
}

/** Throws unless `view` holds at least `count` 4-byte elements (catches shape mix-ups at bind time). */
export function requireElements(label: string, name: string, view: TensorView, count: number): void {
  const available = view.size ?? view.buffer.size - (view.offset ?? 0);
  if (available < count * 4) {
    throw new RangeError(`${label}: ${name} holds ${available} bytes, needs ${count} × 4`);
  }
}

/** Throws unless every shape argument is a non-negative integer. */
export function requireShape(label: string, shape: Record<string, number>): void {
  for (const [name, value] of Object.entries(shape)) {
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`${label}: ${name} = ${value} is not a size`);
  }
}

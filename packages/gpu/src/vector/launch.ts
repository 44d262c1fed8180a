/**
 * Bind-time checks and the software-adapter test shared by the element-wise and normalisation
 * families (vector, residual, gelu, embedding, layernorm). Binding itself is kernel.ts's.
 */
import { type BoundKernel, bindSparse, emptyKernel, type TensorView, workgroupGrid } from '../kernel.ts';
import { isSoftwareAdapter } from '../report.ts';

/**
 * Whether the device runs on a CPU implementation of WebGPU (SwiftShader, lavapipe), where
 * cross-lane work (workgroup barriers, shared-memory reductions) costs far more than on a GPU,
 * so kernels pick other layouts. Reads GPUDevice.adapterInfo; false where a browser lacks it.
 */
export function isSoftwareDevice(device: GPUDevice): boolean {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  return info ? isSoftwareAdapter(info) : false;
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

/**
 * An element-wise kernel over n floats: every view must hold n, the grid is ⌈n / workgroupSize⌉
 * workgroups (2D past the per-dimension limit), and n = 0 gives a kernel with nothing to do.
 * The uniform at `paramsBinding` holds n followed by `extraWords`.
 */
export function bindElementwise(
  device: GPUDevice,
  label: string,
  pipeline: GPUComputePipeline,
  tensors: ReadonlyArray<readonly [binding: number, view: TensorView, name: string]>,
  paramsBinding: number,
  n: number,
  workgroupSize: number,
  extraWords: number[] = [],
): BoundKernel {
  requireShape(label, { n });
  if (n === 0) return emptyKernel(label);
  for (const [, view, name] of tensors) requireElements(label, name, view, n);
  return bindSparse(
    device,
    label,
    pipeline,
    tensors.map(([binding, view]) => [binding, view] as const),
    [paramsBinding, [n, ...extraWords]],
    workgroupGrid(device, Math.ceil(n / workgroupSize)),
  );
}

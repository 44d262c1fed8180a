import type { GptConfig } from '@shoal/model';
import { UsageError } from './usage.ts';

/** The WebGPU engine's gradients. Not wired yet: the WGSL training step lands with the engine. */
export async function gpuGradients(
  _config: GptConfig,
  _params: Float32Array,
  _inputs: Int32Array,
  _targets: Int32Array,
  _B: number,
  _S: number,
): Promise<{ loss: number; grads: Float32Array }> {
  throw new UsageError('the webgpu backend of `shoal grads` is not available yet in this build; use --backend cpu');
}

/**
 * The WebGPU engine's side of `shoal grads` and `shoal train`: a device from the usual adapter
 * search, with "no adapter" turned into a one-line CLI error that names the fallback.
 */
import { type AcquireOptions, acquireGpu, formatAdapter, type GpuContext, NoAdapterError } from '@shoal/gpu';
import { type GptConfig, GpuGpt } from '@shoal/model';
import { UsageError } from './usage.ts';

export async function acquireCliGpu(options: AcquireOptions = {}): Promise<GpuContext> {
  try {
    return await acquireGpu(options);
  } catch (error) {
    if (error instanceof NoAdapterError) {
      throw new UsageError(`${error.message}\n(or run this command with --backend cpu)`);
    }
    throw error;
  }
}

/** Loss and gradient (logical layout) of one batch on the WebGPU engine. */
export async function gpuGradients(
  config: GptConfig,
  params: Float32Array,
  inputs: Int32Array,
  targets: Int32Array,
  B: number,
  S: number,
): Promise<{ loss: number; grads: Float32Array; adapter: string }> {
  const gpu = await acquireCliGpu();
  try {
    const model = await GpuGpt.create(gpu.device, config, B, S);
    try {
      model.writeParams(params);
      const loss = await model.forwardBackward(inputs, targets);
      return { loss, grads: await model.readGrads(), adapter: formatAdapter(gpu.report) };
    } finally {
      model.destroy();
    }
  } finally {
    gpu.destroy();
  }
}

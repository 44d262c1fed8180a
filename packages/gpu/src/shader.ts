/**
 * Shader and pipeline creation that fails with a readable error naming the label, the line and
 * the message, instead of an "invalid object" much later at dispatch time.
 */
export class ShaderError extends Error {
  override name = 'ShaderError';
}

export async function createComputePipeline(
  device: GPUDevice,
  label: string,
  code: string,
  constants: Record<string, number> = {},
  entryPoint = 'main',
): Promise<GPUComputePipeline> {
  const module = device.createShaderModule({ label: `${label}.module`, code });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length > 0) {
    const lines = code.split('\n');
    const detail = errors
      .map((m) => `  ${label}.wgsl:${m.lineNum}:${m.linePos}: ${m.message}\n    ${lines[m.lineNum - 1]?.trim() ?? ''}`)
      .join('\n');
    throw new ShaderError(`WGSL compilation failed for ${label}:\n${detail}`);
  }
  device.pushErrorScope('validation');
  const pipeline = await device
    .createComputePipelineAsync({ label, layout: 'auto', compute: { module, entryPoint, constants } })
    .catch((error: unknown) => {
      throw new ShaderError(`Pipeline creation failed for ${label}: ${String(error)}`);
    });
  const validation = await device.popErrorScope();
  if (validation) throw new ShaderError(`Pipeline validation failed for ${label}: ${validation.message}`);
  return pipeline;
}

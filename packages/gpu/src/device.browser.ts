/** WebGPU in a browser (main thread or worker): navigator.gpu. */
import { openDevice } from './report.ts';
import { type AcquireOptions, type GpuContext, NoAdapterError } from './types.ts';

const INSTALL_HINT =
  'Use a browser with WebGPU: Chrome or Edge 113+ (on Linux, enable chrome://flags/#enable-unsafe-webgpu ' +
  'and #enable-vulkan), Safari 26+, or Firefox 141+ on Windows. WebGPU also needs a secure context: ' +
  'open the page over https:// or on localhost.';

export async function acquireGpu(options: AcquireOptions = {}): Promise<GpuContext> {
  const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
  if (!gpu) {
    const reason =
      globalThis.isSecureContext === false
        ? 'This page is not a secure context (plain http on a non-localhost address), so the browser hides WebGPU.'
        : 'This browser does not expose WebGPU (navigator.gpu is undefined).';
    throw new NoAdapterError(`${reason} ${INSTALL_HINT}`);
  }
  let adapter: GPUAdapter | null = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference ?? 'high-performance' });
  } catch (error) {
    throw new NoAdapterError(`requestAdapter() failed: ${String(error)}. ${INSTALL_HINT}`);
  }
  if (!adapter) {
    throw new NoAdapterError(
      `WebGPU is present but no adapter is available (blocklisted GPU or driver, or WebGPU disabled). ${INSTALL_HINT}`,
    );
  }
  return openDevice(adapter, 'browser');
}

import type { AdapterReport, AdapterSource, GpuContext } from './types.ts';

const LIMIT_NAMES = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupSizeX',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupStorageSize',
  'maxComputeWorkgroupsPerDimension',
] as const;

/** Features we use when present; none is required. */
const OPTIONAL_FEATURES: GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query'];

export function isSoftwareAdapter(info: GPUAdapterInfo): boolean {
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  return /swiftshader|llvmpipe|lavapipe|software|microsoft basic render/.test(text);
}

export function describeAdapter(adapter: GPUAdapter, source: AdapterSource): AdapterReport {
  const info = adapter.info;
  // isFallbackAdapter moved from GPUAdapter to GPUAdapterInfo; read both for older browsers.
  const legacy = adapter as GPUAdapter & { isFallbackAdapter?: boolean };
  const isFallback = Boolean(
    (info as GPUAdapterInfo & { isFallbackAdapter?: boolean }).isFallbackAdapter ?? legacy.isFallbackAdapter,
  );
  const limits = Object.fromEntries(LIMIT_NAMES.map((name) => [name, adapter.limits[name]])) as AdapterReport['limits'];
  return {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    isFallback,
    isSoftware: isSoftwareAdapter(info),
    source,
    limits,
    features: {
      shaderF16: adapter.features.has('shader-f16'),
      subgroups: adapter.features.has('subgroups'),
      timestampQuery: adapter.features.has('timestamp-query'),
    },
  };
}

/** A one-line human summary: `google swiftshader (SwiftShader driver 5.0.0), software`. */
export function formatAdapter(report: AdapterReport): string {
  const name = [report.vendor, report.architecture].filter(Boolean).join(' ') || 'unknown adapter';
  const detail = report.description || report.device;
  const kind = report.isSoftware ? 'software' : report.isFallback ? 'fallback' : 'hardware';
  return `${name}${detail ? ` (${detail})` : ''}, ${kind}`;
}

/**
 * Requests a device with the adapter's maxima for the limits that size our buffers and
 * workgroups (the defaults are far lower: 128 MiB bindings, 256 invocations), and with the
 * optional features the adapter has (and `extraFeatures` where it has them: subgroup matrices,
 * asked for only by the f16 path).
 */
export async function openDevice(
  adapter: GPUAdapter,
  source: AdapterSource,
  extraFeatures: readonly GPUFeatureName[] = [],
): Promise<GpuContext> {
  const requiredLimits: Record<string, number> = {};
  for (const name of LIMIT_NAMES) requiredLimits[name] = adapter.limits[name];
  const requiredFeatures = [...OPTIONAL_FEATURES, ...extraFeatures].filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({ label: 'Shoal.device', requiredLimits, requiredFeatures });
  let destroyed = false;
  return {
    adapter,
    device,
    report: describeAdapter(adapter, source),
    destroy() {
      if (destroyed) return;
      destroyed = true;
      device.destroy();
    },
  };
}

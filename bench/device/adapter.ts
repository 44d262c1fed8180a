/**
 * The adapter part: what Dawn offers on this machine, with and without its
 * `allow_unsafe_apis` toggle (which adds `chromium-experimental-subgroup-matrix` where the driver
 * has it), all limits and features; and the adapter the engine itself picks (acquireGpu).
 */
import { acquireGpu } from '../../packages/gpu/src/device.node.ts';
import { formatAdapter } from '../../packages/gpu/src/report.ts';
import type { AdapterReport } from '../../packages/gpu/src/types.ts';
import { errorMessage, type PartOutput } from './output.ts';

export interface AdapterProbe {
  toggles: string[];
  found: boolean;
  error?: string;
  info?: Record<string, unknown>;
  features?: string[];
  limits?: Record<string, number>;
  /**
   * Where the subgroup-matrix feature is offered: whether a module multiplying f32 8×8 subgroup
   * matrices compiles, and whether a pipeline from it is accepted (the adapter's
   * subgroupMatrixConfigs say which shapes and types it supports).
   */
  subgroupMatrix?: { compiled: boolean; pipeline: boolean; messages: string[] } | { error: string };
}

export interface AdapterPart {
  engine?: { adapter: string; report: AdapterReport } | { error: string };
  probes: AdapterProbe[];
  env: Record<string, string | undefined>;
}

export const UNSAFE_TOGGLE = 'enable-dawn-features=allow_unsafe_apis';

/** Every readable, non-function property of a WebGPU object, own or from its prototype chain (Dawn's are getters). */
function plainFields(object: object): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (let proto: object | null = object; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      if (key === 'constructor' || key in fields) continue;
      const value = (object as Record<string, unknown>)[key];
      if (typeof value === 'function') continue;
      // subgroupMatrixConfigs: a list of Dawn objects whose fields are getters too.
      fields[key] = Array.isArray(value)
        ? value.map((item: unknown) => (typeof item === 'object' && item !== null ? plainFields(item) : item))
        : value;
    }
  }
  return fields;
}

const SUBGROUP_MATRIX_WGSL = `
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(32)
fn main() {
  let a = subgroupMatrixLoad<subgroup_matrix_left<f32, 8, 8>>(&data, 0, false, 8);
  let b = subgroupMatrixLoad<subgroup_matrix_right<f32, 8, 8>>(&data, 64, false, 8);
  var c = subgroup_matrix_result<f32, 8, 8>();
  c = subgroupMatrixMultiplyAccumulate(a, b, c);
  subgroupMatrixStore(&data, 128, c, false, 8);
}`;

async function compileSubgroupMatrix(adapter: GPUAdapter): Promise<AdapterProbe['subgroupMatrix']> {
  try {
    const feature = 'chromium-experimental-subgroup-matrix' as GPUFeatureName;
    const device = await adapter.requestDevice({ requiredFeatures: [feature] });
    try {
      device.pushErrorScope('validation');
      const module = device.createShaderModule({ label: 'DeviceBench.subgroupMatrix', code: SUBGROUP_MATRIX_WGSL });
      const info = await module.getCompilationInfo();
      const compileError = await device.popErrorScope();
      const messages = info.messages.map((m) => `${m.type}: ${m.message}`);
      if (compileError) messages.push(`module: ${compileError.message}`);
      const compiled = !info.messages.some((m) => m.type === 'error') && !compileError;
      let pipeline = false;
      if (compiled) {
        device.pushErrorScope('validation');
        device.createComputePipeline({ label: 'DeviceBench.subgroupMatrix', layout: 'auto', compute: { module } });
        const pipelineError = await device.popErrorScope();
        if (pipelineError) messages.push(`pipeline: ${pipelineError.message}`);
        pipeline = !pipelineError;
      }
      return { compiled, pipeline, messages };
    } finally {
      device.destroy();
    }
  } catch (error) {
    return { error: errorMessage(error) };
  }
}

async function probe(toggles: string[]): Promise<AdapterProbe> {
  try {
    const { create, globals } = await import('webgpu');
    Object.assign(globalThis, globals);
    const instance = create(toggles);
    const adapter = await instance.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) return { toggles, found: false };
    const features = [...adapter.features].map(String).sort();
    const result: AdapterProbe = {
      toggles,
      found: true,
      info: plainFields(adapter.info),
      features,
      limits: plainFields(adapter.limits) as Record<string, number>,
    };
    if (features.includes('chromium-experimental-subgroup-matrix')) {
      result.subgroupMatrix = await compileSubgroupMatrix(adapter);
    }
    // The adapter does not keep its instance alive (see device.node.ts): hold it until here.
    void instance;
    return result;
  } catch (error) {
    return { toggles, found: false, error: errorMessage(error) };
  }
}

export async function adapterPart(out: PartOutput<AdapterPart>): Promise<boolean> {
  const probes = [await probe([]), await probe([UNSAFE_TOGGLE])];
  out.update({ probes });
  try {
    const gpu = await acquireGpu();
    out.update({ engine: { adapter: formatAdapter(gpu.report), report: gpu.report } });
    gpu.destroy();
  } catch (error) {
    out.update({ engine: { error: errorMessage(error) } });
    return false;
  }
  return probes[0]?.found === true;
}

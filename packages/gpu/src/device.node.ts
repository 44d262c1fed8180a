/**
 * WebGPU in Node through Dawn (the `webgpu` npm package) on a Vulkan driver.
 *
 * Order of preference: whatever the system's Vulkan loader finds (a real GPU, or lavapipe when
 * Mesa's ICD is installed), then lavapipe and SwiftShader by explicit ICD path. Dawn reads
 * VK_ICD_FILENAMES when an instance is created, so each attempt sets it and creates its own.
 */
import { existsSync } from 'node:fs';
import { precisionFromEnvironment, SUBGROUP_MATRIX_FEATURE } from './matmul/matrix.ts';
import { openDevice } from './report.ts';
import { type AcquireOptions, type AdapterSource, type GpuContext, NoAdapterError } from './types.ts';

/** Where Debian puts the software Vulkan drivers. CHROMIUM_DIR covers a non-Debian Chromium. */
function softwareIcds(): Record<'lavapipe' | 'swiftshader', string[]> {
  const chromiumDir = process.env.CHROMIUM_DIR;
  return {
    lavapipe: ['/usr/share/vulkan/icd.d/lvp_icd.json', '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json'],
    swiftshader: [
      ...(chromiumDir ? [`${chromiumDir}/vk_swiftshader_icd.json`] : []),
      '/usr/lib/chromium/vk_swiftshader_icd.json',
    ],
  };
}

const INSTALL_HINT =
  'Install a GPU driver with Vulkan support, or a software Vulkan driver: on Debian bookworm, ' +
  '`apt-get install -t bookworm-backports mesa-vulkan-drivers` (lavapipe) or `apt-get install chromium` ' +
  '(ships SwiftShader). `npm test` installs both when run as root.';

type Dawn = typeof import('webgpu');
const liveInstances = new Set<GPU>();
let dawn: Dawn | undefined;

async function loadDawn(): Promise<Dawn> {
  if (!dawn) {
    dawn = await import('webgpu');
    // Dawn's classes (GPUBufferUsage, GPUShaderStage, …) become globals, as in a browser.
    Object.assign(globalThis, dawn.globals);
  }
  return dawn;
}

function sourceOf(adapter: GPUAdapter): AdapterSource {
  const text = `${adapter.info.vendor} ${adapter.info.architecture} ${adapter.info.description}`.toLowerCase();
  if (text.includes('swiftshader')) return 'swiftshader';
  if (text.includes('llvmpipe') || text.includes('lavapipe')) return 'lavapipe';
  return 'system';
}

/** Dawn hides experimental features (subgroup matrices) without this toggle. */
const UNSAFE_APIS = 'enable-dawn-features=allow_unsafe_apis';
let dawnToggles: string[] = [];

async function tryIcd(icd: string | undefined, powerPreference: GPUPowerPreference): Promise<GPUAdapter | null> {
  const { create } = await loadDawn();
  const saved = process.env.VK_ICD_FILENAMES;
  if (icd === undefined) delete process.env.VK_ICD_FILENAMES;
  else process.env.VK_ICD_FILENAMES = icd;
  try {
    const instance = create(dawnToggles);
    const adapter = await instance.requestAdapter({ powerPreference });
    // The adapter does not keep its Dawn instance alive: if the instance is collected, the
    // process crashes on the next GPU call. Hold every instance that produced an adapter.
    if (adapter) liveInstances.add(instance);
    return adapter;
  } catch {
    return null;
  } finally {
    if (saved === undefined) delete process.env.VK_ICD_FILENAMES;
    else process.env.VK_ICD_FILENAMES = saved;
  }
}

export async function acquireGpu(options: AcquireOptions = {}): Promise<GpuContext> {
  const prefer = options.prefer ?? (process.env.SHOAL_ADAPTER as AcquireOptions['prefer']) ?? 'auto';
  if (!['auto', 'system', 'lavapipe', 'swiftshader'].includes(prefer)) {
    throw new NoAdapterError(`Unknown adapter preference "${prefer}": use auto, system, lavapipe or swiftshader.`);
  }
  const powerPreference = options.powerPreference ?? 'high-performance';
  const subgroupMatrix = options.subgroupMatrix ?? precisionFromEnvironment() === 'f16';
  dawnToggles = subgroupMatrix ? [UNSAFE_APIS] : [];
  const extra = subgroupMatrix ? [SUBGROUP_MATRIX_FEATURE] : [];
  const open = (adapter: GPUAdapter, source: AdapterSource) => openDevice(adapter, source, extra);
  const attempts: string[] = [];

  // A user who set VK_ICD_FILENAMES chose their drivers: try exactly that, nothing else.
  const userIcds = process.env.VK_ICD_FILENAMES;
  if (userIcds !== undefined && prefer === 'auto') {
    const adapter = await tryIcd(userIcds, powerPreference);
    if (adapter) return open(adapter, sourceOf(adapter));
    attempts.push(`VK_ICD_FILENAMES=${userIcds}: no adapter (the variable is set, so nothing else was tried)`);
    throw new NoAdapterError(`No WebGPU adapter found. ${INSTALL_HINT}`, attempts);
  }

  if (prefer === 'auto' || prefer === 'system') {
    const adapter = await tryIcd(undefined, powerPreference);
    if (adapter) return open(adapter, sourceOf(adapter));
    attempts.push('system Vulkan drivers: no adapter');
  }
  const icds = softwareIcds();
  for (const name of ['lavapipe', 'swiftshader'] as const) {
    if (prefer !== 'auto' && prefer !== name) continue;
    const found = icds[name].filter((path) => existsSync(path));
    if (found.length === 0) {
      attempts.push(`${name}: no ICD at ${icds[name].join(' or ')}`);
      continue;
    }
    const adapter = await tryIcd(found.join(':'), powerPreference);
    if (adapter) return open(adapter, name);
    attempts.push(`${name}: ICD ${found[0]} present, but Dawn found no adapter on it`);
  }
  throw new NoAdapterError(`No WebGPU adapter found. ${INSTALL_HINT}`, attempts);
}

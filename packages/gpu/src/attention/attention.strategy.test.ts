import { describe, expect, it, vi } from 'vitest';
import { attentionStrategyFor, TILED_FROM_SEQUENCE } from './attention.ts';

/** A device object with what the choice reads: its adapter, features and workgroup memory. */
function fakeDevice(vendor: string, architecture: string, description: string): GPUDevice {
  return {
    adapterInfo: { vendor, architecture, description, device: '', subgroupMinSize: 32, subgroupMaxSize: 32 },
    features: new Set<string>(['subgroups']),
    limits: { maxComputeWorkgroupStorageSize: 49_152, maxComputeInvocationsPerWorkgroup: 1024 },
  } as unknown as GPUDevice;
}

describe('attentionStrategyFor', () => {
  const gpu = fakeDevice('nvidia', '', 'NVIDIA: 580.159.04');
  const software = fakeDevice('mesa', 'llvmpipe', 'llvmpipe (LLVM 15.0.6, 256 bits)');

  it('takes register kernels on a GPU below 1024 tokens and tiled from there (measured on an H200)', () => {
    vi.stubEnv('SHOAL_ATTENTION', '');
    expect(attentionStrategyFor(gpu, 64, 256)).toBe('register');
    expect(attentionStrategyFor(gpu, 64, TILED_FROM_SEQUENCE - 1)).toBe('register');
    expect(attentionStrategyFor(gpu, 64, TILED_FROM_SEQUENCE)).toBe('tiled');
    expect(attentionStrategyFor(gpu, 64)).toBe('register');
    vi.unstubAllEnvs();
  });

  it('keeps software adapters on rows and register whatever the length, and SHOAL_ATTENTION overrides', () => {
    vi.stubEnv('SHOAL_ATTENTION', '');
    expect(attentionStrategyFor(software, 16, 4096)).toBe('rows');
    expect(attentionStrategyFor(software, 64, 4096)).toBe('register');
    vi.stubEnv('SHOAL_ATTENTION', 'rows');
    expect(attentionStrategyFor(gpu, 64, 4096)).toBe('rows');
    vi.unstubAllEnvs();
  });
});

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { acquireGpu } from './device.node.ts';
import { NoAdapterError } from './types.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));

describe('acquireGpu (Node)', () => {
  it('falls back to a software adapter and reports what it got', async () => {
    const gpu = await acquireGpu();
    try {
      expect(['system', 'lavapipe', 'swiftshader']).toContain(gpu.report.source);
      expect(gpu.report.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
      // The device carries the adapter's maxima, not the WebGPU defaults.
      expect(gpu.device.limits.maxComputeInvocationsPerWorkgroup).toBe(
        gpu.adapter.limits.maxComputeInvocationsPerWorkgroup,
      );
    } finally {
      gpu.destroy();
      gpu.destroy(); // twice is harmless
    }
  });

  it('gives SwiftShader when asked', async () => {
    const gpu = await acquireGpu({ prefer: 'swiftshader' });
    expect(gpu.report).toMatchObject({ source: 'swiftshader', architecture: 'swiftshader', isSoftware: true });
    gpu.destroy();
  });

  it('throws NoAdapterError saying what it tried when there is none', async () => {
    const saved = process.env.VK_ICD_FILENAMES;
    process.env.VK_ICD_FILENAMES = '/nonexistent/icd.json';
    try {
      const error = await acquireGpu().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NoAdapterError);
      expect((error as NoAdapterError).message).toMatch(/No WebGPU adapter found/);
      expect((error as NoAdapterError).attempts[0]).toContain('/nonexistent/icd.json');
    } finally {
      if (saved === undefined) delete process.env.VK_ICD_FILENAMES;
      else process.env.VK_ICD_FILENAMES = saved;
    }
  });

  it('makes a GPU test FAIL, not skip, on a machine without an adapter', () => {
    // Runs a real kernel test file in a child Vitest with the Vulkan drivers hidden.
    const result = spawnSync(
      process.execPath,
      [`${root}/node_modules/vitest/vitest.mjs`, 'run', 'packages/gpu/src/reduce/sum.test.ts', '--reporter=verbose'],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json', NO_COLOR: '1', FORCE_COLOR: '0' },
        timeout: 120_000,
      },
    );
    const output = result.stdout + result.stderr;
    expect(result.status).not.toBe(0);
    expect(output).toMatch(/NoAdapterError: No WebGPU adapter found/);
    expect(output).toMatch(/Tests\s+\S*\s*5 failed/);
    expect(output).not.toMatch(/skipped/);
  });
});

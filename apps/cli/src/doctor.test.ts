import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

function doctor(args: string[], env: NodeJS.ProcessEnv = {}) {
  const result = spawnSync(process.execPath, [shoal, 'doctor', ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('shoal doctor', () => {
  it('--json reports an adapter and a passing self-test on this machine', () => {
    const { status, stdout } = doctor(['--json']);
    const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
    expect(report.adapter, report.adapterError).not.toBeNull();
    for (const key of ['vendor', 'architecture', 'description', 'isFallback'])
      expect(report.adapter).toHaveProperty(key);
    expect(report.selfTest).toBe('pass');
    expect(report.selfTestDetail.cases.every((c: { ok: boolean }) => c.ok)).toBe(true);
    expect(report.webrtc.ok, report.webrtc.error).toBe(true);
    expect(status).toBe(0);
  });

  it('can be told to use SwiftShader', () => {
    const { status, stdout } = doctor(['--json', '--adapter', 'swiftshader']);
    const report = JSON.parse(stdout);
    expect(report.adapter.architecture).toBe('swiftshader');
    expect(report.adapter.isFallback).toBe(true);
    expect(report.selfTest).toBe('pass');
    expect(status).toBe(0);
  });

  it('exits non-zero with an explanation when no adapter can be found', () => {
    const json = doctor(['--json'], { VK_ICD_FILENAMES: '/nonexistent/icd.json' });
    expect(json.status).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report.adapter).toBeNull();
    expect(report.selfTest).toBe('fail');
    expect(report.adapterError).toMatch(/No WebGPU adapter found.*mesa-vulkan-drivers/s);

    const text = doctor([], { VK_ICD_FILENAMES: '/nonexistent/icd.json' });
    expect(text.status).toBe(1);
    expect(text.stdout).toContain('✗ WebGPU adapter: No WebGPU adapter found');
  });

  it('rejects an unknown adapter name', () => {
    const { status, stdout } = doctor(['--json', '--adapter', 'quantum']);
    expect(status).toBe(1);
    expect(JSON.parse(stdout).adapterError).toMatch(/Unknown adapter preference "quantum"/);
  });
});

/**
 * bench:device's folder, built here without the .debs (no network) and without compressing Node
 * (xz takes minutes on two cores), then run.sh --local: every Node part on this machine's software
 * adapter at tiny shapes, PyTorch skipped because --local says so. torch_step.py is compiled.
 * Fails when no adapter is found (the adapter part's error is in the message).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildKit, type KitManifest } from './build.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-device-kit-'));
const kit = join(dir, 'kit');
const out = join(dir, 'out');
const json = (part: string) => JSON.parse(readFileSync(join(out, `${part}.json`), 'utf8'));

describe('bench:device', () => {
  let manifest: KitManifest;
  let run: ReturnType<typeof spawnSync>;
  beforeAll(async () => {
    manifest = await buildKit({ out: kit, debs: false, compress: false, xzLevel: 0, log: () => {} });
    run = spawnSync('bash', [join(kit, 'run.sh'), '--local'], {
      env: { ...process.env, OUT: out },
      encoding: 'utf8',
      timeout: 50_000,
    });
  }, 60_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the folder holds Node, Dawn beside the webgpu loader, the bundle, torch_step.py and run.sh', () => {
    for (const file of [
      'bin/node',
      'node_modules/webgpu/index.js',
      'node_modules/webgpu/dist/linux-x64/dawn.node',
      'device.mjs',
      'torch_step.py',
      'run.sh',
    ]) {
      expect(manifest.files[file], file).toBeGreaterThan(0);
    }
    expect(existsSync(join(kit, 'manifest.json'))).toBe(true);
    // The bundle must not carry TF.js (bench:engine's competitor), only what the parts use.
    expect(readFileSync(join(kit, 'device.mjs'), 'utf8')).not.toContain('@tensorflow');
  });

  test('torch_step.py compiles', () => {
    const compiled = spawnSync('python3', ['-m', 'py_compile', join(kit, 'torch_step.py')], { encoding: 'utf8' });
    expect(compiled.status, compiled.stderr).toBe(0);
  });

  test('run.sh --local runs every part on the software adapter and writes JSON and summary.md', () => {
    const log = `${run.stdout}\n${run.stderr}`.slice(-4000);
    expect(run.status, log).toBe(0);
    const adapter = json('adapter');
    expect(adapter.engine.adapter, JSON.stringify(adapter.engine)).toMatch(/software/);
    expect(adapter.probes[0].features).toContain('timestamp-query');

    const grads = json('grads');
    expect(grads.rows).toHaveLength(1);
    expect(grads.rows[0].ok, JSON.stringify(grads.rows[0].worstMax)).toBe(true);
    expect(grads.rows[0].tensors.length).toBeGreaterThan(10);

    const steps = json('steps');
    expect(steps.rows[0].shoal.msPerStep).toBeGreaterThan(0);
    expect(steps.rows[0].torch.fp32).toEqual({ skipped: '--local' });

    const kernels = json('kernels');
    expect(kernels.rows.map((r: { kernel: string }) => r.kernel)).toEqual(
      expect.arrayContaining(['attention.forward', 'adamw', 'matmul.forward 64³']),
    );
    for (const part of [adapter, grads, steps, kernels]) expect(part.complete, part.part).toBe(true);

    const summary = readFileSync(join(out, 'summary.md'), 'utf8');
    expect(summary).toMatch(/\| adapter \| ok \|/);
    expect(summary).toContain('## Kernels');
  });
});

/**
 * bench:device's folder, built here without the .debs (no network) and without compressing Node
 * (xz takes minutes on two cores), then run.sh --local: every Node part on this machine's software
 * adapter at tiny shapes, PyTorch skipped because --local says so. torch_step.py is compiled.
 * Fails when no adapter is found (the adapter part's error is in the message). The PyTorch side's
 * wiring (files, precisions, replies) is run against a stand-in for torch_step.py.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildKit, type KitManifest } from './build.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-device-kit-'));
const kit = join(dir, 'kit');
const out = join(dir, 'out');
const json = (part: string) => JSON.parse(readFileSync(join(out, `${part}.json`), 'utf8'));

/**
 * Speaks torch_step.py's protocol as `python3 torch_step.py --threads N --device cuda` would:
 * checks the parameter file's size, answers steps of 2 ms, and writes the parameters back as
 * the float64 "gradients" (wrong on purpose: the comparison must see it).
 */
const STAND_IN = `#!${process.execPath}
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
const reply = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
const [, , , , threads, , device] = process.argv; // node, this file, torch_step.py, --threads N --device cuda
reply({ ok: true, hello: { torch: 'stand-in', python: '0', executable: process.argv[1], threads: Number(threads), blas: null, device } });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line);
  if (m.op === 'quit') process.exit(0);
  const total = (m.tensors ?? []).reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0);
  const params = m.paramsFile ? new Float32Array(new Uint8Array(readFileSync(m.paramsFile)).buffer) : null;
  if ((m.op === 'setup' || m.op === 'grads') && params?.length !== total) reply({ ok: false, error: 'paramsFile size' });
  else if (m.op === 'setup') reply({ ok: true, parameters: total });
  else if (m.op === 'precision') reply({ ok: true, precision: m.precision });
  else if (m.op === 'run') reply({ ok: true, ms: Array(m.steps).fill(2), cpuMs: Array(m.steps).fill(1), losses: Array(m.steps).fill(5.5) });
  else if (m.op === 'grads') {
    writeFileSync(m.gradsFile, new Uint8Array(Float64Array.from(params).buffer));
    reply({ ok: true, loss: 5.25, gradsFile: m.gradsFile });
  } else reply({ ok: false, error: 'unknown op ' + m.op });
}
`;

describe('bench:device', () => {
  let manifest: KitManifest;
  let run: ReturnType<typeof spawnSync>;
  beforeAll(async () => {
    manifest = await buildKit({ out: kit, debs: false, compress: false, xzLevel: 0, log: () => {} });
    run = spawnSync('bash', [join(kit, 'run.sh'), '--local'], {
      env: { ...process.env, OUT: out },
      encoding: 'utf8',
      timeout: 520_000, // the parts' budgets and their backstops (plan.ts)
    });
  }, 560_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the folder holds Node, Dawn beside the webgpu loader, the bundle, torch_step.py and run.sh', () => {
    for (const file of [
      'bin/node',
      'node_modules/webgpu/index.js',
      'node_modules/webgpu/dist/linux-x64/dawn.node',
      'device.mjs',
      'torch_step.py',
      'moby-dick.txt',
      'run.sh',
    ]) {
      expect(manifest.files[file], file).toBeGreaterThan(0);
    }
    expect(existsSync(join(kit, 'manifest.json'))).toBe(true);
    // The bundle must not carry TF.js (bench:engine's competitor), only what the parts use.
    expect(readFileSync(join(kit, 'device.mjs'), 'utf8')).not.toContain('@tensorflow');
  });

  test('the PyTorch side: parameters by file, three precisions, float64 gradients read back', {
    timeout: 300_000,
  }, () => {
    const standIn = join(dir, 'python3-stand-in.mjs');
    writeFileSync(standIn, STAND_IN);
    chmodSync(standIn, 0o755);
    const torchOut = join(dir, 'torch-out');
    for (const part of ['grads', 'steps']) {
      const result = spawnSync(
        process.execPath,
        [join(kit, 'device.mjs'), part, '--local', '--torch', '--out', torchOut],
        {
          env: { ...process.env, SHOAL_PYTHON: standIn },
          encoding: 'utf8',
          timeout: 120_000,
        },
      );
      // grads fails: the stand-in's "gradients" are the parameters.
      expect(result.status, `${part}: ${result.stderr}`).toBe(part === 'grads' ? 1 : 0);
    }
    const grads = JSON.parse(readFileSync(join(torchOut, 'grads.json'), 'utf8'));
    expect(grads.reference).toMatch(/stand-in autograd, float64, cuda/);
    expect(grads.rows[0]).toMatchObject({ reference: 'pytorch-float64', referenceLoss: 5.25, ok: false });
    expect(grads.rows[0].tensors).toHaveLength(json('grads').rows[0].tensors.length);
    const steps = JSON.parse(readFileSync(join(torchOut, 'steps.json'), 'utf8'));
    expect(steps.torch).toMatchObject({ torch: 'stand-in', device: 'cuda' });
    for (const precision of ['fp32', 'tf32', 'bf16']) {
      expect(steps.rows[0].torch[precision]).toMatchObject({ msPerStep: 2, medianMs: 2, firstLoss: 5.5 });
    }
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

    // A software adapter offers no subgroup matrices: the f16 run takes the rounding tiled
    // kernel and says why; its losses must still be within 1% of the f32 run's.
    const precision = json('precision');
    expect(precision.tensor.chosen).toBeNull();
    expect(precision.tensor.refused.length).toBeGreaterThan(0);
    expect(precision.tensor.roundingGate.accepted, precision.tensor.roundingGate.message).toBe(true);
    expect(precision.matmul.map((r: { family: string; product: string }) => `${r.family} ${r.product}`)).toEqual(
      expect.arrayContaining(['f32 tiled forward', 'f16 rounding tiled backwardWeight']),
    );
    const { runs, difference, passed, corpus } = precision.training;
    expect(corpus).toContain('1216578:beb9fa0f'); // Moby Dick, read from the file beside the bundle
    expect(runs.f32.matmul).not.toMatch(/f16/);
    expect(runs.f16.matmul).toMatch(/f16 operands \(no tensor cores: /);
    for (const run of [runs.f32, runs.f16]) {
      expect(run.msPerStep).toBeGreaterThan(0);
      expect(run.trainLoss).toBeLessThan(run.firstLoss); // it trained
      expect(Number.isFinite(run.valLoss)).toBe(true);
    }
    expect(passed, JSON.stringify(difference)).toBe(true);
    // f16 operands change the sums: equal losses would mean the rounding never ran
    expect(difference.trainLoss).toBeGreaterThan(0);
    for (const part of [adapter, grads, steps, kernels, precision]) expect(part.complete, part.part).toBe(true);

    const summary = readFileSync(join(out, 'summary.md'), 'utf8');
    expect(summary).toMatch(/\| adapter \| ok \|/);
    expect(summary).toMatch(/\| precision \| ok \|/);
    expect(summary).toContain('## Kernels');
    expect(summary).toMatch(/f16 within 1\.0% of f32 \(train and validation loss\): passed/);
  });
});

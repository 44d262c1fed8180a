import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildLayout,
  CpuGpt,
  compareGradients,
  encodeWeights,
  initParameters,
  PRESETS,
  readSafetensors,
} from '@shoal/model';
import { describe, expect, it } from 'vitest';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'shoal-grads-'));
const config = PRESETS.nano;
const layout = buildLayout(config);
const params = initParameters(layout, 3);
const checkpoint = join(dir, 'model.safetensors');
writeFileSync(checkpoint, encodeWeights(layout, params));

const B = 2;
const S = 8;
function tokensFile(name: string, values: number[]): string {
  const path = join(dir, name);
  writeFileSync(path, new Uint8Array(Int32Array.from(values).buffer));
  return path;
}
const rows = Array.from({ length: B * (S + 1) }, (_, i) => (i * 37 + 11) % 256);
const tokens = tokensFile('tokens.bin', rows);

function grads(args: string[]) {
  const result = spawnSync(process.execPath, [shoal, 'grads', ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('shoal grads', () => {
  it('writes every tensor gradient with the same names and shapes, and the loss as JSON', () => {
    const out = join(dir, 'grads.safetensors');
    const { status, stdout, stderr } = grads([
      '--checkpoint',
      checkpoint,
      '--tokens',
      tokens,
      '--batch',
      String(B),
      '--seq',
      String(S),
      '--out',
      out,
      '--backend',
      'cpu',
      '--json',
    ]);
    expect(status, stderr).toBe(0);
    const report = JSON.parse(stdout.trim());
    const { tensors } = readSafetensors(readFileSync(out));
    expect([...tensors.keys()]).toEqual(layout.tensors.map((t) => t.name));
    for (const t of layout.tensors) expect(tensors.get(t.name)?.shape).toEqual(t.shape);

    // The same numbers as the engine computes in-process from the same rows.
    const inputs = Int32Array.from({ length: B * S }, (_, i) => rows[Math.floor(i / S) * (S + 1) + (i % S)] as number);
    const targets = Int32Array.from(
      { length: B * S },
      (_, i) => rows[Math.floor(i / S) * (S + 1) + (i % S) + 1] as number,
    );
    const model = new CpuGpt<Float32Array>(config, B, S, Float32Array);
    expect(report.loss).toBeCloseTo(model.forward(params, inputs, targets), 6);
    const expected = new Float32Array(layout.size);
    model.backward(params, expected);
    const wte = layout.tensors[0] as (typeof layout.tensors)[0];
    expect(tensors.get(wte.name)?.data).toEqual(expected.subarray(0, wte.size));
  });

  it('computes the same loss and gradients on the webgpu backend (the default)', () => {
    const out = join(dir, 'grads-webgpu.safetensors');
    const args = ['--checkpoint', checkpoint, '--tokens', tokens, '--batch', String(B), '--seq', String(S)];
    const { status, stdout, stderr } = grads([...args, '--out', out, '--json']);
    expect(status, stderr).toBe(0);
    const report = JSON.parse(stdout.trim());
    expect(report.backend).toBe('webgpu');
    expect(report.adapter).toMatch(/\S/);
    const reference = join(dir, 'grads-reference.safetensors');
    const cpu = grads([...args, '--out', reference, '--backend', 'cpu', '--json']);
    expect(cpu.status, cpu.stderr).toBe(0);
    const want = JSON.parse(cpu.stdout.trim());
    expect(Math.abs(report.loss - want.loss) / want.loss).toBeLessThan(1e-5);
    const flat = (file: string) => {
      const { tensors } = readSafetensors(readFileSync(file));
      const values = new Float32Array(layout.size);
      for (const t of layout.tensors) values.set(tensors.get(t.name)?.data as Float32Array, t.offset);
      return values;
    };
    const comparison = compareGradients(layout, flat(out), flat(reference), 1e-3);
    expect(comparison.ok, comparison.message).toBe(true);
  });

  const bad: [string, () => string[], RegExp][] = [
    [
      'a tokens file of the wrong size',
      () => ['--tokens', tokensFile('short.bin', rows.slice(1))],
      /needs exactly 4·B·\(S\+1\) = 72/,
    ],
    [
      'a token outside [0, V)',
      () => ['--tokens', tokensFile('range.bin', [...rows.slice(1), 256])],
      /token 256 at row 1, position 8 is outside \[0, 256\)/,
    ],
    [
      'S larger than block_size',
      () => ['--seq', '80', '--batch', '1', '--tokens', tokensFile('long.bin', Array(81).fill(1))],
      /--seq 80 exceeds the model's block_size 64/,
    ],
    [
      'a truncated checkpoint',
      () => {
        const path = join(dir, 'truncated.safetensors');
        writeFileSync(path, readFileSync(checkpoint).subarray(0, 5000));
        return ['--checkpoint', path];
      },
      /checkpoint .*truncated\.safetensors: .*outside the/,
    ],
    [
      'a missing checkpoint',
      () => ['--checkpoint', join(dir, 'nope.safetensors')],
      /cannot read checkpoint .*nope\.safetensors: ENOENT/,
    ],
  ];
  for (const [what, override, message] of bad) {
    it(`refuses ${what} with one line, exit 1 and no output file`, () => {
      const out = join(dir, `bad-${what.replaceAll(/\W+/g, '-')}.safetensors`);
      const base: Record<string, string> = {
        '--checkpoint': checkpoint,
        '--tokens': tokens,
        '--batch': String(B),
        '--seq': String(S),
      };
      const extra = override();
      for (let i = 0; i < extra.length; i += 2) base[extra[i] as string] = extra[i + 1] as string;
      const { status, stderr } = grads([...Object.entries(base).flat(), '--out', out, '--backend', 'cpu']);
      expect(status).toBe(1);
      expect(stderr.trim()).toMatch(message);
      expect(
        stderr
          .trim()
          .split('\n')
          .filter((l) => l.startsWith('shoal:')),
      ).toHaveLength(1);
      expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(existsSync(out)).toBe(false);
    });
  }
});

describe.each(['cpu', 'webgpu'])('shoal train --backend %s', (backend) => {
  function train(args: string[]) {
    const result = spawnSync(
      process.execPath,
      [shoal, 'train', '--backend', backend, '--batch', '2', '--seq', '16', '--eval-batches', '2', '--json', ...args],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(result.status, result.stderr).toBe(0);
    return JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '');
  }

  // three trainings, each a process that builds its engine (on a loaded machine with a cold shader
  // cache, the WebGPU one compiles for tens of seconds)
  it('resumes exactly: 3 + 3 steps give the same weights as 6 in one go', { timeout: 300_000 }, () => {
    const straight = join(dir, backend, 'straight');
    const split = join(dir, backend, 'split');
    const whole = train(['--steps', '6', '--checkpoint-dir', straight]);
    expect(whole).toMatchObject({ steps: 6, tokens: 6 * 32 });
    for (const key of ['valLoss', 'trainLoss', 'seconds', 'tokensPerSecond'])
      expect(Number.isFinite(whole[key])).toBe(true);
    // --steps sets the schedule's length, so the split run asks for the same 6 and stops after 3.
    train(['--steps', '6', '--stop-after', '3', '--checkpoint-dir', split]);
    const resumed = train([
      '--steps',
      '3',
      '--resume',
      join(split, 'shoal-nano.safetensors'),
      '--checkpoint-dir',
      split,
    ]);
    expect(resumed.steps).toBe(6);
    const a = readSafetensors(readFileSync(join(straight, 'shoal-nano.safetensors'))).tensors;
    const b = readSafetensors(readFileSync(join(split, 'shoal-resumed.safetensors'))).tensors;
    for (const [name, entry] of a) expect(b.get(name)?.data, name).toEqual(entry.data);
  });
});

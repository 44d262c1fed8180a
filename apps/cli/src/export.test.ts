import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compareArrays } from '@shoal/gpu';
import { buildLayout, CpuGpt, encodeState, encodeWeights, type GptConfig } from '@shoal/model';
import { runLogits } from '@shoal/onnx';
import { spreadParameters } from '@shoal/onnx/test-params';
import { describe, expect, it } from 'vitest';
import { runShoal } from './test-processes.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-export-'));
// Small and odd (head size 6, V not a multiple of 16) so the engine's JS and SIMD paths both show.
const config: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 12, blockSize: 9, vocabSize: 41 };
const layout = buildLayout(config);
const params = spreadParameters(layout, 5);
const checkpoint = join(dir, 'model.safetensors');
writeFileSync(checkpoint, encodeWeights(layout, params));

/** `shoal export …`, without blocking, so the bad-input cases run side by side. */
const exportCli = (args: string[]) => runShoal(['export', ...args]);

describe('shoal export', () => {
  it('writes an ONNX model whose onnxruntime-web logits match the engine within 1e-4', async () => {
    const out = join(dir, 'model.onnx');
    const { status, stdout, stderr } = await exportCli(['--checkpoint', checkpoint, '--out', out, '--json']);
    expect(status, stderr).toBe(0);
    const bytes = readFileSync(out);
    expect(JSON.parse(stdout.trim())).toEqual({ out, bytes: bytes.length, opset: 17, config });

    const model = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (const [B, T] of [
      [2, 9],
      [1, 4],
    ] as const) {
      const ids = Int32Array.from({ length: B * T }, (_, i) => (i * 13 + 7) % config.vocabSize);
      const got = await runLogits(model, ids, B);
      const engine = new CpuGpt<Float32Array>(config, B, T, Float32Array);
      engine.forward(params, ids, null);
      const comparison = compareArrays(got, engine.logits, { atol: 1e-4, rtol: 0 });
      expect(comparison.ok, comparison.message).toBe(true);
    }
  });

  it('writes opset 20 (the Gelu op) when asked, and says what it wrote without --json', async () => {
    const out = join(dir, 'model-20.onnx');
    const { status, stdout, stderr } = await exportCli(['--checkpoint', checkpoint, '--out', out, '--opset', '20']);
    expect(status, stderr).toBe(0);
    expect(stdout).toMatch(/^wrote .*model-20\.onnx \(\d+ bytes, opset 20\): 2 layers, 2 heads, n_embd 12/);
    expect(existsSync(out)).toBe(true);
  });

  it('refuses bad input with one line, exit code 1 and no output file', async () => {
    const garbage = join(dir, 'garbage.safetensors');
    writeFileSync(garbage, new TextEncoder().encode('this is not a safetensors file at all'));
    const state = join(dir, 'model.state.safetensors');
    writeFileSync(state, encodeState(layout, { m: new Float32Array(layout.size) }, { step: 1 }));
    const out = (i: number) => join(dir, `bad-${i}.onnx`);
    const cases: [string[], RegExp][] = [
      [
        ['--checkpoint', join(dir, 'missing.safetensors')],
        /^shoal: cannot read checkpoint .*missing\.safetensors: ENOENT$/,
      ],
      [['--checkpoint', garbage], /^shoal: checkpoint .*garbage\.safetensors: .*not safetensors$/],
      [['--checkpoint', state], /^shoal: checkpoint .*model\.state\.safetensors: .*that is a run-state file/],
      [['--checkpoint', checkpoint, '--opset', '18'], /^shoal: --opset 18 is not supported: choose 17 or 20$/],
      [
        ['--checkpoint', checkpoint, '--out', join(dir, 'no-such-dir', 'model.onnx')],
        /^shoal: cannot write .*no-such-dir\/model\.onnx: ENOENT$/,
      ],
    ];
    const results = await Promise.all(cases.map(([args], i) => exportCli(['--out', out(i), ...args])));
    results.forEach(({ status, stdout, stderr }, i) => {
      const [, pattern] = cases[i] as [string[], RegExp];
      expect(status, stderr).toBe(1);
      expect(stdout).toBe('');
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr.trim()).toMatch(pattern);
      expect(existsSync(out(i))).toBe(false);
    });
    expect(readdirSync(join(dir)).filter((name) => name.includes('.partial-'))).toEqual([]);
  });
});

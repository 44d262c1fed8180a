import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { mulberry32, randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { dot, f64, numericGradient } from '../vector/gradcheck.ts';
import { TestArena } from '../vector/test-arena.ts';
import { embeddingBackward, embeddingForward } from './embedding.cpu.ts';
import { EmbeddingKernels } from './embedding.ts';

const gpu = useGpu();

// [B, T, C, V]: P = B·T around and past the sort's chunk (256) up to 4096; C below, around and
// past the workgroup; V = 256 (bytes) and larger, including V·⌈C/256⌉ > 65535 workgroups.
const SHAPES: [number, number, number, number][] = [
  [1, 1, 1, 1],
  [1, 5, 3, 7],
  [2, 64, 48, 256],
  [3, 257, 20, 256],
  [4, 300, 64, 256],
  [8, 512, 16, 256],
  [2, 100, 300, 1000],
  [2, 40, 5, 70_000],
];

/** Skewed like text: ~40% one token, the rest uniform, so some buckets are big and some empty. */
function randomTokens(count: number, V: number, seed: number): Int32Array {
  const next = mulberry32(seed);
  const common = Math.floor(V / 8);
  return Int32Array.from({ length: count }, () => (next() < 0.4 ? common : Math.floor(next() * V)));
}

function embeddingInputs(B: number, T: number, C: number, V: number, seed: number) {
  return {
    tokens: randomTokens(B * T, V, seed),
    wte: randomFloats(V * C, seed + 1),
    wpe: randomFloats(T * C, seed + 2),
    dout: randomFloats(B * T * C, seed + 3),
    // Gradients start non-zero: the backward must add into them.
    dwte: randomFloats(V * C, seed + 4),
    dwpe: randomFloats(T * C, seed + 5),
  };
}

const sameBits = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer).equals(Buffer.from(b.buffer));

describe('EmbeddingKernels', () => {
  for (const workgroupSize of [64, 256]) {
    it(`forward and backward match the CPU reference, bit for bit in f32 (workgroup ${workgroupSize})`, async () => {
      const { device } = gpu();
      const kernels = await EmbeddingKernels.create(device, { workgroupSize });
      for (const [index, [B, T, C, V]] of SHAPES.entries()) {
        const shape = `B=${B} T=${T} C=${C} V=${V}`;
        const data = embeddingInputs(B, T, C, V, 100 * index);
        const arena = TestArena.create(device, 'embedding', { ...data, out: B * T * C });
        const v = (name: string) => arena.view(name);
        const bound = [
          kernels.forward(v('out'), v('tokens'), v('wte'), v('wpe'), B, T, C),
          kernels.backward(v('dwte'), v('dwpe'), v('dout'), v('tokens'), B, T, C, V),
        ];
        await runKernels(device, bound);
        for (const kernel of bound) kernel.destroy();
        const got = { out: await arena.read('out'), dwte: await arena.read('dwte'), dwpe: await arena.read('dwpe') };

        // Float64 reference, within a tolerance.
        const want = { out: new Float64Array(B * T * C), dwte: f64(data.dwte), dwpe: f64(data.dwpe) };
        embeddingForward(want.out, data.tokens, f64(data.wte), f64(data.wpe), B, T, C);
        embeddingBackward(want.dwte, want.dwpe, f64(data.dout), data.tokens, B, T, C);
        for (const [name, expected] of Object.entries(want)) {
          const result = compareArrays(got[name as keyof typeof got], expected, { atol: 1e-6 * B * T, rtol: 1e-6 });
          expect(result.ok, `${name}, ${shape}: ${result.message}`).toBe(true);
        }
        // Float32 reference: the same adds in the same order, so the same bits.
        const f32 = { out: new Float32Array(B * T * C), dwte: data.dwte.slice(), dwpe: data.dwpe.slice() };
        embeddingForward(f32.out, data.tokens, data.wte, data.wpe, B, T, C);
        embeddingBackward(f32.dwte, f32.dwpe, data.dout, data.tokens, B, T, C);
        for (const name of ['out', 'dwte', 'dwpe'] as const) {
          expect(sameBits(got[name], f32[name]), `${name}, ${shape}: differs from the f32 CPU bits`).toBe(true);
        }
        expect(await arena.guardsIntact(), `${shape}: a kernel wrote outside its view`).toBe(true);
        arena.destroy();
      }
    });
  }

  it('gives bit-identical gradients from run to run', async () => {
    const { device } = gpu();
    const kernels = await EmbeddingKernels.create(device);
    const [B, T, C, V] = [8, 512, 32, 256];
    const data = embeddingInputs(B, T, C, V, 7);
    const arena = TestArena.create(device, 'embedding.determinism', data);
    const v = (name: string) => arena.view(name);
    const backward = kernels.backward(v('dwte'), v('dwpe'), v('dout'), v('tokens'), B, T, C, V);
    const runs: Float32Array[][] = [];
    for (let run = 0; run < 2; run++) {
      arena.write('dwte', data.dwte);
      arena.write('dwpe', data.dwpe);
      await runKernels(device, [backward]);
      runs.push([await arena.read('dwte'), await arena.read('dwpe')]);
    }
    expect(sameBits(runs[0]?.[0] as Float32Array, runs[1]?.[0] as Float32Array)).toBe(true);
    expect(sameBits(runs[0]?.[1] as Float32Array, runs[1]?.[1] as Float32Array)).toBe(true);
    backward.destroy();
    arena.destroy();
  });
});

describe('embedding CPU reference', () => {
  it('backward matches finite differences of forward (float64)', () => {
    const [B, T, C, V] = [2, 3, 4, 5];
    const data = embeddingInputs(B, T, C, V, 1);
    const [wte, wpe, g] = [f64(data.wte), f64(data.wpe), f64(data.dout)];
    const out = new Float64Array(B * T * C);
    const loss = () => {
      embeddingForward(out, data.tokens, wte, wpe, B, T, C);
      return dot(out, g);
    };
    const [dwte, dwpe] = [new Float64Array(V * C), new Float64Array(T * C)];
    embeddingBackward(dwte, dwpe, g, data.tokens, B, T, C);
    for (const [name, analytic, x] of [['dwte', dwte, wte] as const, ['dwpe', dwpe, wpe] as const]) {
      const result = compareArrays(analytic, numericGradient(loss, x), { atol: 1e-8, rtol: 1e-7 });
      expect(result.ok, `${name}: ${result.message}`).toBe(true);
    }
  });
});

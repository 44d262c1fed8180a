import { compareArrays, type FloatArray } from '@shoal/gpu';
import { buildLayout, CpuGpt, type GptConfig, PRESETS } from '@shoal/model';
import { afterAll, describe, expect, it } from 'vitest';
import { buildModel, exportOnnx, SUPPORTED_OPSETS } from './export.ts';
import { modelProtoType } from './proto.ts';
import { OnnxSampler } from './runner.ts';
import { spreadParameters } from './test-params.ts';

/** onnxruntime's logits against the engine's: max |Δ| ≤ 1e-4 (float32 logits up to about ±10). */
const TOLERANCE = 1e-4;

const ODD: GptConfig = { nLayer: 1, nHead: 2, nEmbd: 8, blockSize: 7, vocabSize: 37 };
const THREE_HEADS: GptConfig = { nLayer: 3, nHead: 3, nEmbd: 12, blockSize: 10, vocabSize: 50 };

/** [name, config, opsets, [batch, seq] pairs]: seq at block_size and below it, batch 1 and 2. */
const GRID: [string, GptConfig, number[], [number, number][]][] = [
  [
    'nano',
    PRESETS.nano,
    [17, 20],
    [
      [1, 64],
      [2, 17],
    ],
  ],
  [
    'odd (1 layer, 2 heads, C 8, V 37, block 7)',
    ODD,
    [17, 20],
    [
      [1, 7],
      [2, 3],
      [2, 1],
    ],
  ],
  [
    '3 layers of 3 heads of 4 (C 12, V 50, block 10)',
    THREE_HEADS,
    [17],
    [
      [2, 10],
      [1, 6],
    ],
  ],
];

function tokens(count: number, V: number, seed: number): Int32Array {
  return Int32Array.from({ length: count }, (_, i) => (i * 31 + seed * 17 + 5) % V);
}

function engineLogits<A extends FloatArray>(
  config: GptConfig,
  params: A,
  ids: Int32Array,
  B: number,
  T: number,
  ArrayType: new (n: number) => A,
  wrap?: ConstructorParameters<typeof CpuGpt<A>>[4],
): A {
  const model = new CpuGpt<A>(config, B, T, ArrayType, wrap);
  model.forward(params, ids, null);
  return model.logits.slice() as A;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs((a[i] as number) - (b[i] as number)));
  return max;
}

const maxAbs = (a: ArrayLike<number>) => maxAbsDiff(a, new Float64Array(a.length));

/** GELU with erf (PyTorch's default): what a careless export would compute instead. */
function erfGelu(out: FloatArray, inp: FloatArray, n: number): void {
  // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: far below the difference this shows.
  const erf = (x: number) => {
    const t = 1 / (1 + 0.3275911 * Math.abs(x));
    const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return Math.sign(x) * (1 - poly * Math.exp(-x * x));
  };
  for (let i = 0; i < n; i++) {
    const x = inp[i] as number;
    out[i] = 0.5 * x * (1 + erf(x / Math.SQRT2));
  }
}

const measured: string[] = [];
afterAll(() => console.log(`ONNX logits vs the engine:\n${measured.join('\n')}`));

describe('exportOnnx: onnxruntime-web logits match the engine', () => {
  for (const [name, config, opsets, shapes] of GRID) {
    for (const opset of opsets) {
      it(`${name}, opset ${opset}`, async () => {
        const layout = buildLayout(config);
        const params = spreadParameters(layout, 7);
        const sampler = await OnnxSampler.create(exportOnnx(config, params, { opset }));
        try {
          for (const [B, T] of shapes) {
            const ids = tokens(B * T, config.vocabSize, B + T);
            const got = await sampler.logits(ids, B);
            const engine = engineLogits(config, params, ids, B, T, Float32Array);
            const reference = engineLogits(config, Float64Array.from(params), ids, B, T, Float64Array);
            const vsEngine = maxAbsDiff(got, engine);
            const vsReference = maxAbsDiff(got, reference);
            measured.push(
              `  ${name}, opset ${opset}, B ${B} T ${T}: max |Δ| ${vsEngine.toExponential(2)} vs the float32 engine, ` +
                `${vsReference.toExponential(2)} vs the float64 reference; max |logit| ${maxAbs(reference).toFixed(2)}`,
            );
            expect(got.length).toBe(B * T * config.vocabSize);
            // Logits of order one and more: a tolerance of 1e-4 is then a strict one.
            expect(maxAbs(reference)).toBeGreaterThan(2);
            const comparison = compareArrays(got, engine, { atol: TOLERANCE, rtol: 0 });
            expect(comparison.ok, comparison.message).toBe(true);
            const exact = compareArrays(got, reference, { atol: TOLERANCE, rtol: 0 });
            expect(exact.ok, exact.message).toBe(true);
          }
        } finally {
          await sampler.release();
        }
      });
    }
  }

  it('the tolerance tells tanh GELU from erf GELU (an engine with erf is 10× further off)', async () => {
    const config = PRESETS.nano;
    const params = spreadParameters(buildLayout(config), 7);
    const B = 2;
    const T = 17;
    const ids = tokens(B * T, config.vocabSize, 3);
    const got = await (await OnnxSampler.create(exportOnnx(config, params))).logits(ids, B);
    const withErf = engineLogits(config, Float64Array.from(params), ids, B, T, Float64Array, {
      wrapKernels: (kernels) => ({ ...kernels, geluForward: erfGelu }),
    });
    expect(maxAbsDiff(got, withErf)).toBeGreaterThan(10 * TOLERANCE);
  });
});

describe('the exported file', () => {
  const config = ODD;
  const layout = buildLayout(config);
  const params = spreadParameters(layout, 1);

  it('declares input_ids int64 [batch, seq], logits float32 [batch, seq, vocab], the opset and the config', () => {
    const decoded = modelProtoType().toObject(modelProtoType().decode(exportOnnx(config, params)), {
      longs: Number,
      defaults: false,
    });
    expect(decoded.irVersion).toBe(8);
    expect(decoded.opsetImport).toEqual([{ version: 17 }]);
    const dims = (info: { type: { tensorType: { elemType: number; shape: { dim: unknown[] } } } }) => [
      info.type.tensorType.elemType,
      info.type.tensorType.shape.dim,
    ];
    expect(decoded.graph.input.map((i: { name: string }) => i.name)).toEqual(['input_ids']);
    expect(dims(decoded.graph.input[0])).toEqual([7, [{ dimParam: 'batch' }, { dimParam: 'seq' }]]);
    expect(decoded.graph.output.map((o: { name: string }) => o.name)).toEqual(['logits']);
    expect(dims(decoded.graph.output[0])).toEqual([1, [{ dimParam: 'batch' }, { dimParam: 'seq' }, { dimValue: 37 }]]);
    const metadata = Object.fromEntries(
      decoded.metadataProps.map(({ key, value }: { key: string; value: string }) => [key, value]),
    );
    expect(metadata).toMatchObject({ n_layer: '1', n_head: '2', n_embd: '8', block_size: '7', vocab_size: '37' });
  });

  it('stores every parameter once (the head reads wte), plus a few small constants', () => {
    const model = buildModel(config, params, { opset: 20 });
    expect(model.irVersion).toBe(9);
    const floats = model.graph.initializer
      .filter((t) => t.dataType === 1)
      .reduce((sum, t) => sum + t.dims.reduce((a, b) => a * b, 1), 0);
    expect(floats - layout.size).toBeGreaterThanOrEqual(0);
    expect(floats - layout.size).toBeLessThan(8);
    const names = model.graph.initializer.map((t) => t.name);
    expect(names).toContain('transformer.wte.weight');
    expect(names).toContain('transformer.h.0.attn.c_attn.weight_t');
    expect(names.filter((n) => n.startsWith('transformer.wte'))).toEqual(['transformer.wte.weight']);
  });

  it('rejects an unsupported opset, params of the wrong length and a bad config, naming the problem', () => {
    expect(() => exportOnnx(config, params, { opset: 18 })).toThrow(
      `ONNX opset 18 is not supported: choose ${SUPPORTED_OPSETS.join(' or ')}`,
    );
    expect(() => exportOnnx(config, params.subarray(1))).toThrow(
      `params have ${layout.size - 1} values, this config needs ${layout.size}`,
    );
    expect(() => exportOnnx({ ...config, nHead: 3 }, params)).toThrow('n_embd 8 is not divisible by n_head 3');
  });
});

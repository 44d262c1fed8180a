/**
 * The start-up gate of an alternative matmul path (a reduced-precision or tensor-core kernel):
 * before the engine uses it on an adapter, it runs the three products of a linear layer on the
 * same random inputs through the candidate and through the f32 path on that same adapter, and
 * refuses the candidate when any result's relative error norm ‖got − want‖ / ‖want‖ exceeds the
 * path's tolerance. Comparing with the f32 path on the adapter (not with the CPU) measures what
 * the candidate changes, whatever the f32 path's own rounding.
 *
 * A path is anything with the family's three methods, so a future kernel (subgroup matrices,
 * f16 storage) is gated by the same code without being a MatmulKernels.
 */
import { createStorageBuffer, readFloat32 } from '../buffers.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import type { MatmulKernels } from './matmul.ts';

export type MatmulPath = Pick<MatmulKernels, 'forward' | 'backwardInput' | 'backwardWeight'>;

export interface GateOptions {
  /** Largest relative error norm accepted per output (f32 with reordered sums: ~1e-6; TF32: ~1e-3). */
  tolerance: number;
  /** Layer shapes [N, C, OC] to compare on; default: one vec4 layer and one off every multiple. */
  shapes?: readonly [number, number, number][];
}

export interface GateResult {
  accepted: boolean;
  /** The largest relative error norm seen, and where. */
  worst: { error: number; output: string; shape: [number, number, number] };
  message: string;
}

const DEFAULT_SHAPES: readonly [number, number, number][] = [
  [128, 64, 192],
  [37, 33, 70],
];

/** Runs the candidate and the f32 reference path on identical inputs and compares. */
export async function gateMatmulPath(
  device: GPUDevice,
  candidate: MatmulPath,
  reference: MatmulPath,
  { tolerance, shapes = DEFAULT_SHAPES }: GateOptions,
): Promise<GateResult> {
  let worst: GateResult['worst'] | undefined;
  for (const [index, shape] of shapes.entries()) {
    const [got, want] = [
      await runLayer(device, candidate, shape, index),
      await runLayer(device, reference, shape, index),
    ];
    for (const output of Object.keys(want) as (keyof typeof want)[]) {
      const error = relativeErrorNorm(got[output], want[output]);
      // NaN compares false: count it as the worst error.
      if (!worst || !(error <= worst.error)) worst = { error: Number.isNaN(error) ? Infinity : error, output, shape };
    }
  }
  if (!worst) throw new RangeError('gateMatmulPath: no shapes to compare on');
  const accepted = worst.error <= tolerance;
  const where = `${worst.output} at N=${worst.shape[0]} C=${worst.shape[1]} OC=${worst.shape[2]}`;
  const message = accepted
    ? `accepted: worst relative error ${worst.error.toExponential(2)} (${where}) ≤ ${tolerance}`
    : `refused: relative error ${worst.error.toExponential(2)} (${where}) exceeds ${tolerance}`;
  return { accepted, worst, message };
}

/** ‖got − want‖₂ / ‖want‖₂ (with ‖want‖ = 0: ‖got‖). */
export function relativeErrorNorm(got: Float32Array, want: Float32Array): number {
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < want.length; i++) {
    const d = (got[i] ?? Number.NaN) - (want[i] as number);
    diff += d * d;
    norm += (want[i] as number) ** 2;
  }
  return Math.sqrt(diff) / (norm > 0 ? Math.sqrt(norm) : 1);
}

/** out = inp·Wᵀ + bias, dinp = dout·W, dW = doutᵀ·inp and dbias on fixed random data. */
async function runLayer(device: GPUDevice, path: MatmulPath, [N, C, OC]: [number, number, number], seed: number) {
  const data = {
    inp: randomFloats(N * C, 7100 + seed),
    weight: randomFloats(OC * C, 7200 + seed),
    bias: randomFloats(OC, 7300 + seed),
    dout: randomFloats(N * OC, 7400 + seed),
    out: new Float32Array(N * OC),
    dinp: new Float32Array(N * C),
    dweight: new Float32Array(OC * C),
    dbias: new Float32Array(OC),
  };
  const buffers = Object.fromEntries(
    Object.entries(data).map(([name, values]) => [name, createStorageBuffer(device, `MatmulGate.${name}`, values)]),
  ) as Record<keyof typeof data, GPUBuffer>;
  const v = (name: keyof typeof data) => ({ buffer: buffers[name] });
  const bound = [
    path.forward({ out: v('out'), inp: v('inp'), weight: v('weight'), bias: v('bias'), N, C, OC }),
    path.backwardInput({ dinp: v('dinp'), dout: v('dout'), weight: v('weight'), N, C, OC }),
    path.backwardWeight({ dweight: v('dweight'), dbias: v('dbias'), dout: v('dout'), inp: v('inp'), N, C, OC }),
  ];
  try {
    await runKernels(device, bound, 'MatmulGate');
    return {
      out: await readFloat32(device, buffers.out, N * OC),
      dinp: await readFloat32(device, buffers.dinp, N * C),
      dweight: await readFloat32(device, buffers.dweight, OC * C),
      dbias: await readFloat32(device, buffers.dbias, OC),
    };
  } finally {
    for (const kernel of bound) kernel.destroy();
    for (const buffer of Object.values(buffers)) buffer.destroy();
  }
}

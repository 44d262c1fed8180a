/**
 * Correctness checks of a matmul family on this device: its three products on random data,
 * compared with the float64 CPU reference (matmul.cpu.ts). The grid tests use them, and so does
 * the tile search (tune.ts) before it times a candidate: a candidate that fails is never chosen.
 */
import { createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { matmulBackward, matmulForward } from './matmul.cpu.ts';
import type { MatmulKernels } from './matmul.ts';

/** f32 sums of K products of values in [-1, 1]: a few ulps per term, plus ulps of the value. */
export const tolerance = (K: number) => ({ atol: 1e-6 * (K + 4), rtol: 1e-5 });

export interface MatmulCheckShape {
  N: number;
  C: number;
  OC: number;
  bias: boolean;
  splitK?: number;
  /** backwardInput adds into dinp (default) or overwrites it. */
  accumulate?: boolean;
}

/**
 * Runs forward, backwardInput and backwardWeight on random data (gradients and `out` starting
 * non-zero) in one pass, and compares each output with the float64 CPU reference.
 */
export async function checkMatmulShape(
  device: GPUDevice,
  family: MatmulKernels,
  { N, C, OC, bias, splitK, accumulate = true }: MatmulCheckShape,
  seed: number,
): Promise<string[]> {
  const host = {
    inp: randomFloats(N * C, seed),
    weight: randomFloats(OC * C, seed + 1),
    bias: randomFloats(OC, seed + 2),
    dout: randomFloats(N * OC, seed + 3),
    out: randomFloats(N * OC, seed + 4), // garbage the forward must overwrite
    dinp: randomFloats(N * C, seed + 5),
    dweight: randomFloats(OC * C, seed + 6),
    dbias: randomFloats(OC, seed + 7),
  };
  const buffers = Object.fromEntries(
    Object.entries(host).map(([name, data]) => [name, createStorageBuffer(device, `MatmulTest.${name}`, data)]),
  ) as Record<keyof typeof host, GPUBuffer>;
  const view = (name: keyof typeof host) => ({ buffer: buffers[name] });
  const bound = [
    family.forward({
      out: view('out'),
      inp: view('inp'),
      weight: view('weight'),
      bias: bias ? view('bias') : null,
      N,
      C,
      OC,
    }),
    family.backwardInput({ dinp: view('dinp'), dout: view('dout'), weight: view('weight'), N, C, OC, accumulate }),
    family.backwardWeight({
      dweight: view('dweight'),
      dbias: bias ? view('dbias') : null,
      dout: view('dout'),
      inp: view('inp'),
      N,
      C,
      OC,
      splitK,
    }),
  ];
  await runKernels(device, bound, 'MatmulTest');

  const f64 = (values: Float32Array) => Float64Array.from(values);
  const want = {
    out: new Float64Array(N * OC),
    dinp: accumulate ? f64(host.dinp) : new Float64Array(N * C),
    dweight: f64(host.dweight),
    dbias: f64(host.dbias),
  };
  matmulForward(want.out, f64(host.inp), f64(host.weight), bias ? f64(host.bias) : null, N, C, OC);
  matmulBackward(
    want.dinp,
    want.dweight,
    bias ? want.dbias : null,
    f64(host.dout),
    f64(host.inp),
    f64(host.weight),
    N,
    C,
    OC,
  );
  const reduction = { out: C, dinp: OC, dweight: N, dbias: N };
  const failures: string[] = [];
  for (const name of ['out', 'dinp', 'dweight', 'dbias'] as const) {
    const got = await readFloat32(device, buffers[name], want[name].length);
    const result = compareArrays(got, want[name], tolerance(reduction[name]));
    if (!result.ok) failures.push(`${name}: ${result.message}`);
  }
  for (const kernel of bound) kernel.destroy();
  for (const buffer of Object.values(buffers)) buffer.destroy();
  return failures;
}

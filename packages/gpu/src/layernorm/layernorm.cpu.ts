/**
 * CPU reference for layer normalisation over the last axis (llm.c layernorm_forward /
 * layernorm_backward). inp, out, dinp, dout are [N, C] row-major (N = B·T rows of C channels);
 * weight, bias, dweight, dbias are [C]; mean, rstd are [N], saved by forward for backward.
 *
 *   forward:  mean = Σx/C,  var = Σ(x − mean)²/C (biased),  rstd = 1/√(var + 1e-5)
 *             out = (x − mean)·rstd·weight + bias                    (overwrites out, mean, rstd)
 *   backward: norm = (x − mean)·rstd,  dnorm = weight·dout
 *             dinp    += rstd·(dnorm − mean_C(dnorm) − norm·mean_C(dnorm·norm))
 *             dweight += Σ_rows dout·norm,  dbias += Σ_rows dout      (all three ADD)
 *
 * Sums run in JS numbers (f64) and round once per store, so with Float32Array tensors this is
 * an f32 CPU backend whose reductions are more accurate than the GPU's.
 */
import type { FloatArray } from '../kernel.ts';

// The float32 WebAssembly SIMD version the CPU training backend runs.
export { SimdLayernorm } from './layernorm.simd.cpu.ts';

export const LAYERNORM_EPS = 1e-5;

export function layernormForward(
  out: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  bias: FloatArray,
  N: number,
  C: number,
): void {
  for (let row = 0; row < N; row++) {
    const base = row * C;
    let sum = 0;
    for (let i = 0; i < C; i++) sum += inp[base + i] as number;
    const m = sum / C;
    // Two passes (mean, then squared deviations) rather than E[x²] − m², which cancels badly.
    let squares = 0;
    for (let i = 0; i < C; i++) {
      const d = (inp[base + i] as number) - m;
      squares += d * d;
    }
    const s = 1 / Math.sqrt(squares / C + LAYERNORM_EPS);
    for (let i = 0; i < C; i++) {
      out[base + i] = ((inp[base + i] as number) - m) * s * (weight[i] as number) + (bias[i] as number);
    }
    mean[row] = m;
    rstd[row] = s;
  }
}

export function layernormBackward(
  dinp: FloatArray,
  dweight: FloatArray,
  dbias: FloatArray,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  mean: FloatArray,
  rstd: FloatArray,
  N: number,
  C: number,
): void {
  for (let row = 0; row < N; row++) {
    const base = row * C;
    const m = mean[row] as number;
    const s = rstd[row] as number;
    // The two row means the input gradient needs.
    let dnormMean = 0;
    let dnormNormMean = 0;
    for (let i = 0; i < C; i++) {
      const norm = ((inp[base + i] as number) - m) * s;
      const dnorm = (weight[i] as number) * (dout[base + i] as number);
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= C;
    dnormNormMean /= C;
    for (let i = 0; i < C; i++) {
      const d = dout[base + i] as number;
      const norm = ((inp[base + i] as number) - m) * s;
      const dnorm = (weight[i] as number) * d;
      dbias[i] = (dbias[i] as number) + d;
      dweight[i] = (dweight[i] as number) + norm * d;
      dinp[base + i] = (dinp[base + i] as number) + (dnorm - dnormMean - norm * dnormNormMean) * s;
    }
  }
}

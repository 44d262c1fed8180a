/**
 * CPU reference for the residual connection (llm.c residual_forward / residual_backward):
 *   forward:  out[i] = a[i] + b[i]                 (overwrites out)
 *   backward: da[i] += dout[i], db[i] += dout[i]   (both ADD, as every backward here)
 * All arrays are flat [n] (n = B·T·C for the model's activations).
 */
import type { FloatArray } from '../kernel.ts';

// The float32 WebAssembly SIMD version the CPU training backend runs.
export { SimdResidual } from './residual.simd.cpu.ts';

export function residualForward(out: FloatArray, a: FloatArray, b: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) out[i] = (a[i] as number) + (b[i] as number);
}

export function residualBackward(da: FloatArray, db: FloatArray, dout: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const d = dout[i] as number;
    da[i] = (da[i] as number) + d;
    db[i] = (db[i] as number) + d;
  }
}

/** dst[i] += src[i]: the residual backward for one branch, and any gradient that fans in. */
export function residualAccumulate(dst: FloatArray, src: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = (dst[i] as number) + (src[i] as number);
}

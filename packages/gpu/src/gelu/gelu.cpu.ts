/**
 * CPU reference for GELU, GPT-2's tanh approximation (llm.c gelu_forward / gelu_backward):
 *   forward:  out  = ½·x·(1 + tanh(a)),  a = √(2/π)·(x + 0.044715·x³)   (overwrites out)
 *   backward: dinp += gelu′(x)·dout                                       (ADDS)
 *     gelu′(x) = ½·(1 + tanh a) + ½·x·sech²(a)·√(2/π)·(1 + 3·0.044715·x²)
 * Flat over n = B·T·4C floats. Math.tanh saturates cleanly (no overflow for large |x|), and
 * sech² = 1 − tanh² needs no cosh (which overflows to ∞ past |a| ≈ 710; llm.c's 1/cosh² survives
 * that as 1/∞ = 0, but one transcendental is cheaper than two).
 */
import type { FloatArray } from '../kernel.ts';

// The float32 WebAssembly SIMD version the CPU training backend runs.
export { SimdGelu } from './gelu.simd.cpu.ts';

export const GELU_SCALE = Math.sqrt(2 / Math.PI);
export const GELU_CUBIC = 0.044715;

export function geluForward(out: FloatArray, inp: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const x = inp[i] as number;
    out[i] = 0.5 * x * (1 + Math.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)));
  }
}

export function geluBackward(dinp: FloatArray, inp: FloatArray, dout: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const x = inp[i] as number;
    const t = Math.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
    const sech2 = 1 - t * t;
    const grad = 0.5 * (1 + t) + 0.5 * x * sech2 * GELU_SCALE * (1 + 3 * GELU_CUBIC * x * x);
    dinp[i] = (dinp[i] as number) + grad * (dout[i] as number);
  }
}

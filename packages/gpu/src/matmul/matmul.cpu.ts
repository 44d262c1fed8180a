/**
 * CPU reference for the matmul family, in llm.c's layout: weights are [OC, C] row-major
 * ("[out, in]"), activations [N, C] row-major with N = B·T.
 *
 *   forward:  out[N,OC]  = inp[N,C] · W[OC,C]ᵀ + bias[OC]       (overwrites out)
 *   backward: dinp[N,C] += dout[N,OC] · W[OC,C]
 *             dW[OC,C]  += dout[N,OC]ᵀ · inp[N,C]
 *             dbias[OC] += Σ_n dout[n, :]                         (all three ADD, as in llm.c)
 *
 * The fast versions serve the CPU backend and the simulator, so they keep every inner loop on
 * contiguous memory and share one pass over a weight (or input) row between four rows of the
 * other operand; they allocate nothing. The naive versions are the definition, kept beside them
 * for the tests. Both accumulate in JS numbers (f64) and round once per store.
 */
import type { FloatArray } from '../kernel.ts';

/** out[N,OC] = inp[N,C]·W[OC,C]ᵀ + bias. Naive: one dot product per output, in index order. */
export function matmulForwardNaive(
  out: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  bias: FloatArray | null,
  N: number,
  C: number,
  OC: number,
): void {
  for (let n = 0; n < N; n++) {
    for (let o = 0; o < OC; o++) {
      let sum = bias ? (bias[o] as number) : 0;
      for (let i = 0; i < C; i++) sum += (inp[n * C + i] as number) * (weight[o * C + i] as number);
      out[n * OC + o] = sum;
    }
  }
}

/**
 * out[N,OC] = inp[N,C]·W[OC,C]ᵀ + bias, llm.c's matmul_forward loop order: four rows of inp
 * share one pass over each weight row (so W is streamed N/4 times, not N times); a remainder
 * loop takes the last N mod 4 rows.
 */
export function matmulForward(
  out: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  bias: FloatArray | null,
  N: number,
  C: number,
  OC: number,
): void {
  let n = 0;
  for (; n + 4 <= N; n += 4) {
    const i0 = n * C;
    const i1 = i0 + C;
    const i2 = i1 + C;
    const i3 = i2 + C;
    for (let o = 0; o < OC; o++) {
      const b = bias ? (bias[o] as number) : 0;
      let s0 = b;
      let s1 = b;
      let s2 = b;
      let s3 = b;
      const w = o * C;
      for (let i = 0; i < C; i++) {
        const wi = weight[w + i] as number;
        s0 += (inp[i0 + i] as number) * wi;
        s1 += (inp[i1 + i] as number) * wi;
        s2 += (inp[i2 + i] as number) * wi;
        s3 += (inp[i3 + i] as number) * wi;
      }
      out[n * OC + o] = s0;
      out[(n + 1) * OC + o] = s1;
      out[(n + 2) * OC + o] = s2;
      out[(n + 3) * OC + o] = s3;
    }
  }
  for (; n < N; n++) {
    const row = n * C;
    for (let o = 0; o < OC; o++) {
      let sum = bias ? (bias[o] as number) : 0;
      const w = o * C;
      for (let i = 0; i < C; i++) sum += (inp[row + i] as number) * (weight[w + i] as number);
      out[n * OC + o] = sum;
    }
  }
}

/** The backward pass by definition: one sum per gradient element, added to what is there. */
export function matmulBackwardNaive(
  dinp: FloatArray,
  dweight: FloatArray,
  dbias: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  N: number,
  C: number,
  OC: number,
): void {
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < C; i++) {
      let sum = 0;
      for (let o = 0; o < OC; o++) sum += (dout[n * OC + o] as number) * (weight[o * C + i] as number);
      dinp[n * C + i] = (dinp[n * C + i] as number) + sum;
    }
  }
  for (let o = 0; o < OC; o++) {
    for (let i = 0; i < C; i++) {
      let sum = 0;
      for (let n = 0; n < N; n++) sum += (dout[n * OC + o] as number) * (inp[n * C + i] as number);
      dweight[o * C + i] = (dweight[o * C + i] as number) + sum;
    }
    if (dbias) {
      let sum = 0;
      for (let n = 0; n < N; n++) sum += dout[n * OC + o] as number;
      dbias[o] = (dbias[o] as number) + sum;
    }
  }
}

/**
 * dinp += dout·W, dW += doutᵀ·inp, dbias += Σ_n dout, with llm.c's loop orders: every inner loop
 * runs along a contiguous row of length C (an axpy), and four rows are combined per pass so each
 * destination element is loaded and stored once per four contributions.
 */
export function matmulBackward(
  dinp: FloatArray,
  dweight: FloatArray,
  dbias: FloatArray | null,
  dout: FloatArray,
  inp: FloatArray,
  weight: FloatArray,
  N: number,
  C: number,
  OC: number,
): void {
  // dinp[n,:] += Σ_o dout[n,o]·W[o,:], four weight rows at a time.
  for (let n = 0; n < N; n++) {
    const row = n * C;
    const d = n * OC;
    let o = 0;
    for (; o + 4 <= OC; o += 4) {
      const d0 = dout[d + o] as number;
      const d1 = dout[d + o + 1] as number;
      const d2 = dout[d + o + 2] as number;
      const d3 = dout[d + o + 3] as number;
      const w0 = o * C;
      const w1 = w0 + C;
      const w2 = w1 + C;
      const w3 = w2 + C;
      for (let i = 0; i < C; i++) {
        dinp[row + i] =
          (dinp[row + i] as number) +
          ((weight[w0 + i] as number) * d0 +
            (weight[w1 + i] as number) * d1 +
            (weight[w2 + i] as number) * d2 +
            (weight[w3 + i] as number) * d3);
      }
    }
    for (; o < OC; o++) {
      const g = dout[d + o] as number;
      const w = o * C;
      for (let i = 0; i < C; i++) dinp[row + i] = (dinp[row + i] as number) + (weight[w + i] as number) * g;
    }
  }
  // dW[o,:] += Σ_n dout[n,o]·inp[n,:], four input rows at a time; dbias[o] += Σ_n dout[n,o].
  for (let o = 0; o < OC; o++) {
    const w = o * C;
    let biasSum = 0;
    let n = 0;
    for (; n + 4 <= N; n += 4) {
      const d0 = dout[n * OC + o] as number;
      const d1 = dout[(n + 1) * OC + o] as number;
      const d2 = dout[(n + 2) * OC + o] as number;
      const d3 = dout[(n + 3) * OC + o] as number;
      biasSum += d0 + d1 + d2 + d3;
      const r0 = n * C;
      const r1 = r0 + C;
      const r2 = r1 + C;
      const r3 = r2 + C;
      for (let i = 0; i < C; i++) {
        dweight[w + i] =
          (dweight[w + i] as number) +
          ((inp[r0 + i] as number) * d0 +
            (inp[r1 + i] as number) * d1 +
            (inp[r2 + i] as number) * d2 +
            (inp[r3 + i] as number) * d3);
      }
    }
    for (; n < N; n++) {
      const g = dout[n * OC + o] as number;
      biasSum += g;
      const r = n * C;
      for (let i = 0; i < C; i++) dweight[w + i] = (dweight[w + i] as number) + (inp[r + i] as number) * g;
    }
    if (dbias) dbias[o] = (dbias[o] as number) + biasSum;
  }
}

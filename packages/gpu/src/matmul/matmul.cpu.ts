/**
 * CPU reference for the matmul family, in llm.c's layout: weights are [OC, C] row-major
 * ("[out, in]"), activations [N, C] row-major with N = B·T.
 *
 *   forward:  out[N,OC]  = inp[N,C] · W[OC,C]ᵀ + bias[OC]       (overwrites out)
 *   backward: dinp[N,C] += dout[N,OC] · W[OC,C]
 *             dW[OC,C]  += dout[N,OC]ᵀ · inp[N,C]
 *             dbias[OC] += Σ_n dout[n, :]                         (all three ADD, as in llm.c)
 *
 * The fast versions serve the float64 model (the reference gradients are checked against) and
 * the float32 CPU backend where WebAssembly SIMD is missing; with it, the backend runs
 * SimdMatmul (matmul.simd.cpu.ts, 40–50 GFLOP/s a thread). They keep every inner loop on contiguous
 * memory and block registers over 2–4 rows of each operand (about 4 GFLOP/s in V8 on f32,
 * 2.5–4× the naive loops); they allocate nothing. The naive versions are the definition, kept
 * beside them for the tests. Both accumulate in JS numbers (f64) and round once per store.
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
 * out[N,OC] = inp[N,C]·W[OC,C]ᵀ + bias, llm.c's matmul_forward loop order with register blocking:
 * four rows of inp and two weight rows per pass over C, so each loaded value feeds 2–4 products
 * (1.5× the speed of one weight row at a time in V8). Remainder loops take the last N mod 4 rows
 * and an odd last output.
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
    const o0 = n * OC;
    let o = 0;
    for (; o + 2 <= OC; o += 2) {
      const ba = bias ? (bias[o] as number) : 0;
      const bb = bias ? (bias[o + 1] as number) : 0;
      let s0 = ba;
      let s1 = ba;
      let s2 = ba;
      let s3 = ba;
      let t0 = bb;
      let t1 = bb;
      let t2 = bb;
      let t3 = bb;
      const wa = o * C;
      const wb = wa + C;
      for (let i = 0; i < C; i++) {
        const x = weight[wa + i] as number;
        const y = weight[wb + i] as number;
        const a0 = inp[i0 + i] as number;
        const a1 = inp[i1 + i] as number;
        const a2 = inp[i2 + i] as number;
        const a3 = inp[i3 + i] as number;
        s0 += a0 * x;
        s1 += a1 * x;
        s2 += a2 * x;
        s3 += a3 * x;
        t0 += a0 * y;
        t1 += a1 * y;
        t2 += a2 * y;
        t3 += a3 * y;
      }
      out[o0 + o] = s0;
      out[o0 + OC + o] = s1;
      out[o0 + 2 * OC + o] = s2;
      out[o0 + 3 * OC + o] = s3;
      out[o0 + o + 1] = t0;
      out[o0 + OC + o + 1] = t1;
      out[o0 + 2 * OC + o + 1] = t2;
      out[o0 + 3 * OC + o + 1] = t3;
    }
    for (; o < OC; o++) {
      const b = bias ? (bias[o] as number) : 0;
      let s0 = b;
      let s1 = b;
      let s2 = b;
      let s3 = b;
      const w = o * C;
      for (let i = 0; i < C; i++) {
        const x = weight[w + i] as number;
        s0 += (inp[i0 + i] as number) * x;
        s1 += (inp[i1 + i] as number) * x;
        s2 += (inp[i2 + i] as number) * x;
        s3 += (inp[i3 + i] as number) * x;
      }
      out[o0 + o] = s0;
      out[o0 + OC + o] = s1;
      out[o0 + 2 * OC + o] = s2;
      out[o0 + 3 * OC + o] = s3;
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
 * runs along contiguous rows of length C. Register blocking as in the forward: dinp takes two of
 * its rows and four weight rows per pass, dW two of its rows and four input rows, so each
 * destination element is loaded and stored once per four contributions. The odd last row of
 * either is a plain axpy.
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
  // dinp[n,:] += Σ_o dout[n,o]·W[o,:].
  let n = 0;
  for (; n + 2 <= N; n += 2) {
    const r0 = n * C;
    const r1 = r0 + C;
    const d0 = n * OC;
    const d1 = d0 + OC;
    let o = 0;
    for (; o + 4 <= OC; o += 4) {
      const p0 = dout[d0 + o] as number;
      const p1 = dout[d0 + o + 1] as number;
      const p2 = dout[d0 + o + 2] as number;
      const p3 = dout[d0 + o + 3] as number;
      const q0 = dout[d1 + o] as number;
      const q1 = dout[d1 + o + 1] as number;
      const q2 = dout[d1 + o + 2] as number;
      const q3 = dout[d1 + o + 3] as number;
      const w0 = o * C;
      const w1 = w0 + C;
      const w2 = w1 + C;
      const w3 = w2 + C;
      for (let i = 0; i < C; i++) {
        const x0 = weight[w0 + i] as number;
        const x1 = weight[w1 + i] as number;
        const x2 = weight[w2 + i] as number;
        const x3 = weight[w3 + i] as number;
        dinp[r0 + i] = (dinp[r0 + i] as number) + (x0 * p0 + x1 * p1 + x2 * p2 + x3 * p3);
        dinp[r1 + i] = (dinp[r1 + i] as number) + (x0 * q0 + x1 * q1 + x2 * q2 + x3 * q3);
      }
    }
    for (; o < OC; o++) {
      const p = dout[d0 + o] as number;
      const q = dout[d1 + o] as number;
      const w = o * C;
      for (let i = 0; i < C; i++) {
        const x = weight[w + i] as number;
        dinp[r0 + i] = (dinp[r0 + i] as number) + x * p;
        dinp[r1 + i] = (dinp[r1 + i] as number) + x * q;
      }
    }
  }
  for (; n < N; n++) {
    const r = n * C;
    for (let o = 0; o < OC; o++) {
      const g = dout[n * OC + o] as number;
      const w = o * C;
      for (let i = 0; i < C; i++) dinp[r + i] = (dinp[r + i] as number) + (weight[w + i] as number) * g;
    }
  }

  // dW[o,:] += Σ_n dout[n,o]·inp[n,:] and dbias[o] += Σ_n dout[n,o].
  let o = 0;
  for (; o + 2 <= OC; o += 2) {
    const wa = o * C;
    const wb = wa + C;
    let biasA = 0;
    let biasB = 0;
    let m = 0;
    for (; m + 4 <= N; m += 4) {
      const e = m * OC + o;
      const p0 = dout[e] as number;
      const p1 = dout[e + OC] as number;
      const p2 = dout[e + 2 * OC] as number;
      const p3 = dout[e + 3 * OC] as number;
      const q0 = dout[e + 1] as number;
      const q1 = dout[e + OC + 1] as number;
      const q2 = dout[e + 2 * OC + 1] as number;
      const q3 = dout[e + 3 * OC + 1] as number;
      biasA += p0 + p1 + p2 + p3;
      biasB += q0 + q1 + q2 + q3;
      const r0 = m * C;
      const r1 = r0 + C;
      const r2 = r1 + C;
      const r3 = r2 + C;
      for (let i = 0; i < C; i++) {
        const a0 = inp[r0 + i] as number;
        const a1 = inp[r1 + i] as number;
        const a2 = inp[r2 + i] as number;
        const a3 = inp[r3 + i] as number;
        dweight[wa + i] = (dweight[wa + i] as number) + (a0 * p0 + a1 * p1 + a2 * p2 + a3 * p3);
        dweight[wb + i] = (dweight[wb + i] as number) + (a0 * q0 + a1 * q1 + a2 * q2 + a3 * q3);
      }
    }
    for (; m < N; m++) {
      const p = dout[m * OC + o] as number;
      const q = dout[m * OC + o + 1] as number;
      biasA += p;
      biasB += q;
      const r = m * C;
      for (let i = 0; i < C; i++) {
        const a = inp[r + i] as number;
        dweight[wa + i] = (dweight[wa + i] as number) + a * p;
        dweight[wb + i] = (dweight[wb + i] as number) + a * q;
      }
    }
    if (dbias) {
      dbias[o] = (dbias[o] as number) + biasA;
      dbias[o + 1] = (dbias[o + 1] as number) + biasB;
    }
  }
  for (; o < OC; o++) {
    const w = o * C;
    let biasSum = 0;
    for (let m = 0; m < N; m++) {
      const g = dout[m * OC + o] as number;
      biasSum += g;
      const r = m * C;
      for (let i = 0; i < C; i++) dweight[w + i] = (dweight[w + i] as number) + (inp[r + i] as number) * g;
    }
    if (dbias) dbias[o] = (dbias[o] as number) + biasSum;
  }
}

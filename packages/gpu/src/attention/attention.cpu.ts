/**
 * Causal multi-head self-attention on the CPU, as llm.c's attention_forward / attention_backward:
 * the reference for the GPU kernels and what the CPU backend runs.
 *
 * Shapes: qkv [B, T, 3C] (q, k, v along the last dim; head h uses channels h·hs … (h+1)·hs of
 * each, hs = C / NH), out [B, T, C], preatt and att [B, NH, T, T] (row t holds keys 0…t; the
 * rest of att is 0 and the rest of preatt is left untouched, as in llm.c).
 */
import type { FloatArray } from '../kernel.ts';

// The float32 WebAssembly SIMD version the CPU training backend runs.
export { SimdAttention } from './attention.simd.cpu.ts';

export function attentionForward(
  out: FloatArray,
  preatt: FloatArray,
  att: FloatArray,
  qkv: FloatArray,
  B: number,
  T: number,
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const C3 = 3 * C;
  const scale = 1 / Math.sqrt(hs);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < NH; h++) {
        const query = b * T * C3 + t * C3 + h * hs;
        const row = ((b * NH + h) * T + t) * T;
        // Pass 1: q·k scaled, and the row max for a stable softmax.
        let max = Number.NEGATIVE_INFINITY;
        for (let t2 = 0; t2 <= t; t2++) {
          const key = b * T * C3 + t2 * C3 + C + h * hs;
          let dot = 0;
          for (let i = 0; i < hs; i++) dot += (qkv[query + i] as number) * (qkv[key + i] as number);
          dot *= scale;
          preatt[row + t2] = dot;
          if (dot > max) max = dot;
        }
        // Pass 2: exp and sum; pass 3: normalise, and zero the masked (future) keys.
        let sum = 0;
        for (let t2 = 0; t2 <= t; t2++) {
          const e = Math.exp((preatt[row + t2] as number) - max);
          att[row + t2] = e;
          sum += e;
        }
        const inv = sum === 0 ? 0 : 1 / sum;
        for (let t2 = 0; t2 <= t; t2++) att[row + t2] = (att[row + t2] as number) * inv;
        for (let t2 = t + 1; t2 < T; t2++) att[row + t2] = 0;
        // Pass 4: out = Σ att · v.
        const output = b * T * C + t * C + h * hs;
        for (let i = 0; i < hs; i++) out[output + i] = 0;
        for (let t2 = 0; t2 <= t; t2++) {
          const value = b * T * C3 + t2 * C3 + 2 * C + h * hs;
          const a = att[row + t2] as number;
          for (let i = 0; i < hs; i++) out[output + i] = (out[output + i] as number) + a * (qkv[value + i] as number);
        }
      }
    }
  }
}

/**
 * Backward of attentionForward: dqkv [B, T, 3C] is ACCUMULATED into; datt and dpreatt
 * [B, NH, T, T] are scratch, overwritten on keys 0…t of each row (llm.c accumulates into them
 * and needs them zeroed first). The softmax backward uses
 * dpreatt = att ⊙ (datt − Σ att·datt), O(T) per row instead of llm.c's O(T²) double loop.
 */
export function attentionBackward(
  dqkv: FloatArray,
  dpreatt: FloatArray,
  datt: FloatArray,
  dout: FloatArray,
  qkv: FloatArray,
  att: FloatArray,
  B: number,
  T: number,
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const C3 = 3 * C;
  const scale = 1 / Math.sqrt(hs);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < NH; h++) {
        const row = ((b * NH + h) * T + t) * T;
        const gradOut = b * T * C + t * C + h * hs;
        const query = b * T * C3 + t * C3 + h * hs;
        // Through out = Σ att·v: datt[t2] = v[t2]·dout, dv[t2] += att[t2]·dout.
        let weighted = 0; // Σ att·datt, for the softmax backward
        for (let t2 = 0; t2 <= t; t2++) {
          const value = b * T * C3 + t2 * C3 + 2 * C + h * hs;
          const a = att[row + t2] as number;
          let dot = 0;
          for (let i = 0; i < hs; i++) {
            const g = dout[gradOut + i] as number;
            dot += (qkv[value + i] as number) * g;
            dqkv[value + i] = (dqkv[value + i] as number) + a * g;
          }
          datt[row + t2] = dot;
          weighted += a * dot;
        }
        // Through the softmax, then preatt = scale · q·k.
        for (let t2 = 0; t2 <= t; t2++) {
          const d = (att[row + t2] as number) * ((datt[row + t2] as number) - weighted);
          dpreatt[row + t2] = d;
          const ds = d * scale;
          const key = b * T * C3 + t2 * C3 + C + h * hs;
          for (let i = 0; i < hs; i++) {
            dqkv[query + i] = (dqkv[query + i] as number) + (qkv[key + i] as number) * ds;
            dqkv[key + i] = (dqkv[key + i] as number) + (qkv[query + i] as number) * ds;
          }
        }
      }
    }
  }
}

/**
 * CPU reference for GPT-2's input embedding, llm.c's "encoder" (encoder_forward / encoder_backward).
 * tokens are int32 [B·T] with 0 ≤ token < V (the caller guarantees it); wte [V, C] token
 * embeddings; wpe [maxT, C] position embeddings (rows 0…T−1 are used); out, dout [B, T, C].
 *
 *   forward:  out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]        (overwrites out)
 *   backward: dwte[v,:] += Σ_{(b,t): tokens[b,t] = v} dout[b,t,:]
 *             dwpe[t,:] += Σ_b dout[b,t,:]                        (both ADD)
 *
 * The backward adds positions in (b, t) order, one store per add, as llm.c does; the GPU
 * kernels add in the same order, so with f32 arrays the two agree bit for bit.
 */
import type { FloatArray } from '../kernel.ts';

export function embeddingForward(
  out: FloatArray,
  tokens: Int32Array,
  wte: FloatArray,
  wpe: FloatArray,
  B: number,
  T: number,
  C: number,
): void {
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const outBase = (b * T + t) * C;
      const wteBase = (tokens[b * T + t] as number) * C;
      const wpeBase = t * C;
      for (let i = 0; i < C; i++) out[outBase + i] = (wte[wteBase + i] as number) + (wpe[wpeBase + i] as number);
    }
  }
}

export function embeddingBackward(
  dwte: FloatArray,
  dwpe: FloatArray,
  dout: FloatArray,
  tokens: Int32Array,
  B: number,
  T: number,
  C: number,
): void {
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const doutBase = (b * T + t) * C;
      const wteBase = (tokens[b * T + t] as number) * C;
      const wpeBase = t * C;
      for (let i = 0; i < C; i++) {
        const d = dout[doutBase + i] as number;
        dwte[wteBase + i] = (dwte[wteBase + i] as number) + d;
        dwpe[wpeBase + i] = (dwpe[wpeBase + i] as number) + d;
      }
    }
  }
}

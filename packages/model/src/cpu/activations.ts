/**
 * Activation buffers for one (B, T) batch, llm.c style: every intermediate the backward pass
 * needs, allocated once as views into one array (from the backend's allocator: for the float32
 * backend, in the SIMD kernels' memory). Sizes in floats, shapes in comments.
 */
import type { FloatArray } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';

export interface LayerActivations<A extends FloatArray> {
  ln1: A; // (B,T,C)
  ln1Mean: A; // (B,T)
  ln1Rstd: A; // (B,T)
  qkv: A; // (B,T,3C)
  atty: A; // (B,T,C) attention output before the projection
  preatt: A; // (B,NH,T,T)
  att: A; // (B,NH,T,T)
  attproj: A; // (B,T,C)
  residual2: A; // (B,T,C) = residual in + attproj
  ln2: A; // (B,T,C)
  ln2Mean: A; // (B,T)
  ln2Rstd: A; // (B,T)
  fch: A; // (B,T,4C)
  fchGelu: A; // (B,T,4C)
  fcproj: A; // (B,T,C)
  residual3: A; // (B,T,C) = residual2 + fcproj: the block's output
}

export interface Activations<A extends FloatArray> {
  encoded: A; // (B,T,C)
  layers: LayerActivations<A>[];
  lnf: A; // (B,T,C)
  lnfMean: A; // (B,T)
  lnfRstd: A; // (B,T)
  logits: A; // (B,T,V); the backward pass turns it into dlogits in place
  losses: A; // (B,T)
  size: number;
}

/**
 * Which activations a model (or a pipeline stage of it) keeps: its blocks, and whether it ends in
 * ln_f, the head and the loss. The whole model is `{ layers: nLayer, head: true }`.
 */
export interface ActivationShape {
  layers: number;
  head: boolean;
}

/** Floats per layer activation and in all, for one (B, T) batch. */
function activationSizes(config: GptConfig, B: number, T: number, shape?: ActivationShape) {
  const { nHead: NH, nEmbd: C } = config;
  const L = shape ? shape.layers : config.nLayer;
  const V = !shape || shape.head ? config.vocabSize : 0;
  const headRows = !shape || shape.head ? 1 : 0;
  const BT = B * T;
  const perLayer = {
    ln1: BT * C,
    ln1Mean: BT,
    ln1Rstd: BT,
    qkv: BT * 3 * C,
    atty: BT * C,
    preatt: B * NH * T * T,
    att: B * NH * T * T,
    attproj: BT * C,
    residual2: BT * C,
    ln2: BT * C,
    ln2Mean: BT,
    ln2Rstd: BT,
    fch: BT * 4 * C,
    fchGelu: BT * 4 * C,
    fcproj: BT * C,
    residual3: BT * C,
  } satisfies Record<keyof LayerActivations<FloatArray>, number>;
  const layerSize = Object.values(perLayer).reduce((a, b) => a + b, 0);
  return { perLayer, L, V, headRows, size: BT * C + L * layerSize + headRows * (BT * C + 2 * BT + BT) + BT * V };
}

/** Floats `allocateActivations` takes for one (B, T) batch. */
export function activationFloats(config: GptConfig, B: number, T: number, shape?: ActivationShape): number {
  return activationSizes(config, B, T, shape).size;
}

/** The activations as views into one block of `allocate(activationFloats(…))`. */
export function allocateActivations<A extends FloatArray>(
  config: GptConfig,
  B: number,
  T: number,
  allocate: (n: number) => A,
  shape?: ActivationShape,
): Activations<A> {
  const { nEmbd: C } = config;
  const BT = B * T;
  const { perLayer, size, L, V, headRows } = activationSizes(config, B, T, shape);
  const memory = allocate(size);
  let offset = 0;
  const take = (n: number) => {
    const view = memory.subarray(offset, offset + n) as A;
    offset += n;
    return view;
  };
  const encoded = take(BT * C);
  const layers = Array.from({ length: L }, () => {
    const layer = {} as LayerActivations<A>;
    for (const [name, n] of Object.entries(perLayer)) layer[name as keyof LayerActivations<A>] = take(n);
    return layer;
  });
  return {
    encoded,
    layers,
    lnf: take(headRows * BT * C),
    lnfMean: take(headRows * BT),
    lnfRstd: take(headRows * BT),
    logits: take(BT * V),
    losses: take(headRows * BT),
    size,
  };
}

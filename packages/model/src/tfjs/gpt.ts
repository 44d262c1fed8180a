/**
 * GPT-2 (nanoGPT / llm.c) written in TensorFlow.js ops, with TF.js's own autodiff for the
 * backward pass. Two uses: the golden reference our CPU model and the WebGPU step are checked
 * against (an implementation that shares none of our kernels), and the competitor in the engine
 * benchmark (`TfjsTrainer`: forward, backward, global-norm clip and AdamW, all in TF.js ops).
 *
 * Never exported from the package index: the browser bundle must not pull in TF.js. The caller
 * passes the `tf` module in, having registered the backend it wants and TF.js's gradients
 * (`@tensorflow/tfjs-core/dist/register_all_gradients.js`; in plain Node see bench/tfjs.ts).
 * Parameters and gradients cross the boundary as flat logical vectors (layout.ts).
 */
import type * as TfCore from '@tensorflow/tfjs-core';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout } from '../layout.ts';
import { checkTokens } from '../tokens.ts';
import type { TrainConfig } from '../train-config.ts';

export type Tf = typeof TfCore;
type Tensor = TfCore.Tensor;

const LAYERNORM_EPS = 1e-5;
/**
 * Added to the scores above the diagonal. Finite rather than −∞: exp() of it underflows to exactly
 * 0 in float32 all the same, and WGSL implementations may assume no infinities.
 */
const MASKED = -1e9;

/** The loss throws inside TF.js's tape with a terse message when gradients were never registered. */
function assertGradientsRegistered(tf: Tf): void {
  if (!tf.getGradient('Sum') || !tf.getGradient('BatchMatMul')) {
    throw new Error(
      "TF.js gradients are not registered: import '@tensorflow/tfjs-core/dist/register_all_gradients.js' " +
        '(under Vitest), or call loadTfjs() from bench/tfjs.ts (plain Node)',
    );
  }
}

function checkBatch(config: GptConfig, inputs: Int32Array, targets: Int32Array, B: number, T: number): void {
  if (T > config.blockSize) throw new RangeError(`sequence length ${T} exceeds block_size ${config.blockSize}`);
  if (inputs.length !== B * T || targets.length !== B * T) {
    throw new RangeError(`expected ${B * T} inputs and targets, got ${inputs.length} and ${targets.length}`);
  }
  checkTokens(inputs, config.vocabSize);
  checkTokens(targets, config.vocabSize);
}

/** [T, T]: 0 where key ≤ query (causal), MASKED above the diagonal. */
function causalBias(tf: Tf, T: number): TfCore.Tensor2D {
  const bias = new Float32Array(T * T);
  for (let query = 0; query < T; query++) bias.fill(MASKED, query * T + query + 1, (query + 1) * T);
  return tf.tensor2d(bias, [T, T]);
}

/**
 * The mean cross-entropy of the batch: the whole GPT-2 forward pass in TF.js ops.
 * `weight(name)` gives the tensor of a nanoGPT parameter name, shaped as in the layout;
 * `inputs` is int32 [B, T], `targets` int32 [B·T], `mask` the causalBias for T.
 */
function gptLoss(
  tf: Tf,
  config: GptConfig,
  weight: (name: string) => Tensor,
  inputs: TfCore.Tensor2D,
  targets: TfCore.Tensor1D,
  mask: TfCore.Tensor2D,
): TfCore.Scalar {
  const [B, T] = inputs.shape;
  const { nLayer, nHead: NH, nEmbd: C, vocabSize: V } = config;
  const hs = C / NH;
  const BT = B * T;

  // Pre-LayerNorm over channels, biased variance as PyTorch. x: [BT, C].
  const layerNorm = (x: Tensor, prefix: string) => {
    const centered = tf.sub(x, tf.mean(x, 1, true));
    const variance = tf.mean(tf.square(centered), 1, true);
    const normalised = tf.mul(centered, tf.rsqrt(tf.add(variance, LAYERNORM_EPS)));
    return tf.add(tf.mul(normalised, weight(`${prefix}.weight`)), weight(`${prefix}.bias`));
  };
  // nanoGPT stores linear weights [out, in]: y = x·Wᵀ + b.
  const linear = (x: Tensor, prefix: string) =>
    tf.add(tf.matMul(x, weight(`${prefix}.weight`), false, true), weight(`${prefix}.bias`));
  // tanh GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
  const gelu = (x: Tensor) => {
    const inner = tf.mul(tf.add(x, tf.mul(tf.pow(x, 3), 0.044715)), Math.sqrt(2 / Math.PI));
    return tf.mul(tf.mul(x, 0.5), tf.add(tf.tanh(inner), 1));
  };
  // [BT, C] → [B, NH, T, hs].
  const splitHeads = (x: Tensor) => tf.transpose(tf.reshape(x, [B, T, NH, hs]), [0, 2, 1, 3]);

  const wte = weight('transformer.wte.weight');
  const positions = tf.slice(weight('transformer.wpe.weight'), [0, 0], [T, C]); // [T, C]
  // gather's gradient is UnsortedSegmentSum, which the wasm backend lacks (4.22): there, look the
  // tokens up as one-hot · wte instead, the same sums (V is 256 bytes, so the product is cheap).
  const tokenRows = tf.getKernel('UnsortedSegmentSum', tf.getBackend())
    ? tf.gather(wte, tf.reshape(inputs, [BT]))
    : tf.matMul(tf.cast(tf.oneHot(tf.reshape(inputs, [BT]), V), 'float32'), wte);
  let x: Tensor = tf.reshape(tf.add(tf.reshape(tokenRows, [B, T, C]), positions), [BT, C]);
  for (let l = 0; l < nLayer; l++) {
    const h = `transformer.h.${l}`;
    const qkv = linear(layerNorm(x, `${h}.ln_1`), `${h}.attn.c_attn`); // [BT, 3C]: q, k, v in that order
    const [q, k, v] = tf.split(qkv, 3, 1) as [Tensor, Tensor, Tensor];
    const scores = tf.add(tf.mul(tf.matMul(splitHeads(q), splitHeads(k), false, true), 1 / Math.sqrt(hs)), mask);
    const attended = tf.matMul(tf.softmax(scores), splitHeads(v)); // [B, NH, T, hs]
    const merged = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [BT, C]);
    x = tf.add(x, linear(merged, `${h}.attn.c_proj`));
    const hidden = gelu(linear(layerNorm(x, `${h}.ln_2`), `${h}.mlp.c_fc`)); // [BT, 4C]
    x = tf.add(x, linear(hidden, `${h}.mlp.c_proj`));
  }
  // Tied head, no bias: logits = ln_f(x)·wteᵀ, [BT, V].
  const logits = tf.matMul(layerNorm(x, 'transformer.ln_f'), wte, false, true);
  const picked = tf.sum(tf.mul(tf.logSoftmax(logits), tf.cast(tf.oneHot(targets, V), 'float32')));
  return tf.div(picked, -BT) as TfCore.Scalar;
}

/**
 * Loss and the gradient of the mean loss for every parameter, by TF.js autodiff on whatever
 * backend `tf` has active. Async because GPU backends can only read back asynchronously.
 */
export async function tfjsLossAndGrads(
  tf: Tf,
  config: GptConfig,
  params: Float32Array,
  inputs: Int32Array,
  targets: Int32Array,
  B: number,
  T: number,
): Promise<{ loss: number; grads: Float32Array }> {
  const layout = buildLayout(config);
  if (params.length !== layout.size)
    throw new RangeError(`params have ${params.length} values, the model needs ${layout.size}`);
  checkBatch(config, inputs, targets, B, T);
  assertGradientsRegistered(tf);

  const { value, grads } = tf.tidy(() => {
    const weights = layout.tensors.map((t) => tf.tensor(params.subarray(t.offset, t.offset + t.size), t.shape));
    const index = new Map(layout.tensors.map((t, i) => [t.name, i]));
    const lossOf = tf.valueAndGrads((...args: Tensor[]) =>
      gptLoss(
        tf,
        config,
        (name) => args[index.get(name) as number] as Tensor,
        tf.tensor2d(inputs, [B, T], 'int32'),
        tf.tensor1d(targets, 'int32'),
        causalBias(tf, T),
      ),
    );
    return lossOf(weights);
  });
  try {
    const flat = new Float32Array(layout.size);
    const parts = await Promise.all(grads.map((g) => g.data<'float32'>()));
    layout.tensors.forEach((t, i) => {
      flat.set(parts[i] as Float32Array, t.offset);
    });
    const [loss] = await value.data();
    return { loss: loss as number, grads: flat };
  } finally {
    tf.dispose([value, ...grads]);
  }
}

/** The optimizer settings TfjsTrainer needs; a TrainConfig has them all. */
export type TfjsTrainOptions = Pick<
  TrainConfig,
  'batchSize' | 'seqLen' | 'beta1' | 'beta2' | 'eps' | 'weightDecay' | 'gradClip'
>;

/**
 * The benchmark competitor: a training step as a TF.js user would write it. One tf.Variable per
 * parameter tensor (and per AdamW moment); `step` runs forward, backward, global-norm clipping and
 * AdamW (decoupled decay on 2-D tensors only, bias correction) in TF.js ops, and reads the loss
 * back once, as our engine does. Same update as CpuTrainer (adamwUpdate, clipScale in @shoal/gpu).
 */
export class TfjsTrainer {
  readonly layout: ParamLayout;
  private readonly params: TfCore.Variable[];
  private readonly m: TfCore.Variable[];
  private readonly v: TfCore.Variable[];
  private readonly mask: TfCore.Tensor2D;
  private adamStep = 0;

  constructor(
    private readonly tf: Tf,
    readonly config: GptConfig,
    initial: Float32Array,
    readonly train: TfjsTrainOptions,
  ) {
    this.layout = buildLayout(config);
    if (initial.length !== this.layout.size)
      throw new RangeError(`params have ${initial.length} values, the model needs ${this.layout.size}`);
    if (train.seqLen > config.blockSize)
      throw new RangeError(`sequence length ${train.seqLen} exceeds block_size ${config.blockSize}`);
    assertGradientsRegistered(tf);
    // Unnamed variables: TF.js names must be unique per process, and two trainers may coexist.
    this.params = this.layout.tensors.map((t) =>
      tf.variable(tf.tensor(initial.subarray(t.offset, t.offset + t.size), t.shape)),
    );
    this.m = this.layout.tensors.map((t) => tf.variable(tf.zeros(t.shape), false));
    this.v = this.layout.tensors.map((t) => tf.variable(tf.zeros(t.shape), false));
    this.mask = causalBias(tf, train.seqLen);
  }

  /** One training step at learning rate `lr`; returns the batch's mean loss (before the update). */
  async step(inputs: Int32Array, targets: Int32Array, lr: number): Promise<number> {
    const { tf, config, layout, params, m, v } = this;
    const { batchSize: B, seqLen: T, beta1, beta2, eps, weightDecay, gradClip } = this.train;
    checkBatch(config, inputs, targets, B, T);
    this.adamStep++;
    const bc1 = 1 - beta1 ** this.adamStep;
    const bc2 = 1 - beta2 ** this.adamStep;
    const index = new Map(layout.tensors.map((t, i) => [t.name, i]));

    const loss = tf.tidy(() => {
      const inputTokens = tf.tensor2d(inputs, [B, T], 'int32');
      const targetTokens = tf.tensor1d(targets, 'int32');
      const weight = (name: string) => params[index.get(name) as number] as Tensor;
      const { value, grads } = tf.variableGrads(
        () => gptLoss(tf, config, weight, inputTokens, targetTokens, this.mask),
        params,
      );
      const gradList = params.map((p) => grads[p.name] as Tensor);
      // Global-norm clip: scale = min(1, clip / (‖g‖ + 1e-6)), as clipScale. Pairwise adds, not
      // tf.addN: TF.js webgpu binds every addN input at once, past the 8–16 storage buffers allowed.
      const squares = gradList.map((g) => tf.sum(tf.square(g)));
      const norm = tf.sqrt(squares.reduce((total, s) => tf.add(total, s)));
      const scale = gradClip > 0 ? tf.minimum(tf.div(gradClip, tf.add(norm, 1e-6)), 1) : tf.scalar(1);
      layout.tensors.forEach((t, i) => {
        const p = params[i] as TfCore.Variable;
        const g = tf.mul(gradList[i] as Tensor, scale);
        const mi = tf.add(tf.mul(m[i] as Tensor, beta1), tf.mul(g, 1 - beta1));
        const vi = tf.add(tf.mul(v[i] as Tensor, beta2), tf.mul(tf.square(g), 1 - beta2));
        const adam = tf.div(tf.div(mi, bc1), tf.add(tf.sqrt(tf.div(vi, bc2)), eps));
        // Decoupled decay on the old θ, 2-D tensors only: θ ← θ − lr·(adam + wd·θ).
        const update = t.decay ? tf.add(adam, tf.mul(p, weightDecay)) : adam;
        p.assign(tf.sub(p, tf.mul(update, lr)));
        (m[i] as TfCore.Variable).assign(mi);
        (v[i] as TfCore.Variable).assign(vi);
      });
      return value;
    });
    const [lossValue] = await loss.data();
    loss.dispose();
    return lossValue as number;
  }

  /** Current parameters as a flat logical vector. */
  async getParams(): Promise<Float32Array> {
    const flat = new Float32Array(this.layout.size);
    const parts = await Promise.all(this.params.map((p) => p.data<'float32'>()));
    this.layout.tensors.forEach((t, i) => {
      flat.set(parts[i] as Float32Array, t.offset);
    });
    return flat;
  }

  dispose(): void {
    this.tf.dispose([...this.params, ...this.m, ...this.v, this.mask]);
  }
}

/**
 * The GPT-2 backward pass on WebGPU, bound once for one batch shape: the forward plan in reverse
 * (cpu/gpt.ts's backward), adding every parameter gradient into `model.grads` (cleared by the
 * caller before each step). The activation gradients are per model, not per layer, as in llm.c:
 * - one `dresidual` [B·T, C] carries ∂L/∂residual down the stack: a residual add passes its
 *   gradient to both inputs unchanged, so the branch matmuls read it directly and each
 *   LayerNorm backward adds its input gradient into it (no residual-backward kernels at all);
 * - the branch gradients (dfchGelu, dln2, datty, dln1, dlnf) are overwritten by the matmul that
 *   produces them (accumulate: false); dfch and dqkv, which GELU and attention add into, are
 *   zeroed by a fill just before each layer uses them.
 *
 * A pipeline stage without the head starts from `dresidual` as the caller left it (the next
 * stage's input gradient, uploaded before the pass) instead of the loss; one that does not embed
 * stops after its first block, leaving ∂L/∂input in `dresidual`.
 */
import type { BoundKernel, TensorView } from '@shoal/gpu';
import { blockView, type GptBuffers, paramView } from './buffers.ts';

/** The backward pass's kernels, in dispatch order; reads what the forward pass kept in `model.acts`. */
export function bindBackward(model: GptBuffers): BoundKernel[] {
  const { acts, stage } = model;
  const residualOut = (l: number) => (l < stage.firstBlock ? acts.view('encoded') : acts.view(`${l}.residual3`));
  const out: BoundKernel[] = [];
  if (stage.head) out.push(...bindHeadBackward(model, residualOut(stage.endBlock - 1)));
  for (let l = stage.endBlock - 1; l >= stage.firstBlock; l--) {
    out.push(...bindMlpBackward(model, l), ...bindAttentionBackward(model, l, residualOut(l - 1)));
  }
  if (stage.embeds) out.push(bindEmbeddingBackward(model));
  return out;
}

/** Block `l`'s views: its weights (w), their gradients (g), its activations (x) and the activation gradients (d). */
function blockViews(model: GptBuffers, l: number) {
  const { params: P, grads: G, acts, dacts, layout } = model;
  const d = (name: string) => dacts.view(name);
  return {
    w: (suffix: string) => blockView(layout, P, l, suffix),
    g: (suffix: string) => blockView(layout, G, l, suffix),
    x: (name: string) => acts.view(`${l}.${name}`),
    d,
    dres: d('dresidual'),
  };
}

/** Block `l`'s MLP, from ∂L/∂residual3 in `dresidual` to ∂L/∂residual2 there. */
function bindMlpBackward(model: GptBuffers, l: number): BoundKernel[] {
  const { B, T, kernels: k } = model;
  const C = model.config.nEmbd;
  const BT = B * T;
  const { w, g, x, d, dres } = blockViews(model, l);
  return [
    // MLP: dres is ∂L/∂residual3 = ∂L/∂fcproj.
    k.matmul.backwardInput({
      dinp: d('dfchGelu'),
      dout: dres,
      weight: w('mlp.c_proj.weight'),
      N: BT,
      C: 4 * C,
      OC: C,
      accumulate: false,
    }),
    k.matmul.backwardWeight({
      dweight: g('mlp.c_proj.weight'),
      dbias: g('mlp.c_proj.bias'),
      dout: dres,
      inp: x('fchGelu'),
      N: BT,
      C: 4 * C,
      OC: C,
    }),
    k.vector.fill(d('dfch'), 0, BT * 4 * C),
    k.gelu.backward(d('dfch'), x('fch'), d('dfchGelu'), BT * 4 * C),
    k.matmul.backwardInput({
      dinp: d('dln2'),
      dout: d('dfch'),
      weight: w('mlp.c_fc.weight'),
      N: BT,
      C,
      OC: 4 * C,
      accumulate: false,
    }),
    k.matmul.backwardWeight({
      dweight: g('mlp.c_fc.weight'),
      dbias: g('mlp.c_fc.bias'),
      dout: d('dfch'),
      inp: x('ln2'),
      N: BT,
      C,
      OC: 4 * C,
    }),
    // dres becomes ∂L/∂residual2.
    k.layernorm.backward(
      dres,
      g('ln_2.weight'),
      g('ln_2.bias'),
      d('dln2'),
      x('residual2'),
      w('ln_2.weight'),
      x('ln2Mean'),
      x('ln2Rstd'),
      BT,
      C,
    ),
  ];
}

/**
 * Block `l`'s attention, from ∂L/∂residual2 in `dresidual` to ∂L/∂(the block's input) there;
 * `residualIn` is that input (the previous block's output, or the embedding).
 */
function bindAttentionBackward(model: GptBuffers, l: number, residualIn: TensorView): BoundKernel[] {
  const { B, T, kernels: k } = model;
  const { nEmbd: C, nHead: NH } = model.config;
  const BT = B * T;
  const { w, g, x, d, dres } = blockViews(model, l);
  return [
    // Attention: ∂L/∂attproj = ∂L/∂residual2.
    k.matmul.backwardInput({
      dinp: d('datty'),
      dout: dres,
      weight: w('attn.c_proj.weight'),
      N: BT,
      C,
      OC: C,
      accumulate: false,
    }),
    k.matmul.backwardWeight({
      dweight: g('attn.c_proj.weight'),
      dbias: g('attn.c_proj.bias'),
      dout: dres,
      inp: x('atty'),
      N: BT,
      C,
      OC: C,
    }),
    k.vector.fill(d('dqkv'), 0, BT * 3 * C),
    k.attention.backward(
      { qkv: x('qkv'), out: x('atty'), lse: x('lse'), dout: d('datty'), dqkv: d('dqkv') },
      { B, T, C, NH },
    ),
    k.matmul.backwardInput({
      dinp: d('dln1'),
      dout: d('dqkv'),
      weight: w('attn.c_attn.weight'),
      N: BT,
      C,
      OC: 3 * C,
      accumulate: false,
    }),
    k.matmul.backwardWeight({
      dweight: g('attn.c_attn.weight'),
      dbias: g('attn.c_attn.bias'),
      dout: d('dqkv'),
      inp: x('ln1'),
      N: BT,
      C,
      OC: 3 * C,
    }),
    // dres becomes ∂L/∂(this layer's input).
    k.layernorm.backward(
      dres,
      g('ln_1.weight'),
      g('ln_1.bias'),
      d('dln1'),
      residualIn,
      w('ln_1.weight'),
      x('ln1Mean'),
      x('ln1Rstd'),
      BT,
      C,
    ),
  ];
}

/** The embedding's gradients (wte and wpe) from ∂L/∂(the first block's input) in `dresidual`. */
function bindEmbeddingBackward(model: GptBuffers): BoundKernel {
  const { B, T, kernels: k, grads: G, inputs, dacts, layout } = model;
  const { nEmbd: C, vocabSize: V } = model.config;
  return k.embedding.backward(
    paramView(layout, G, 'transformer.wte.weight'),
    paramView(layout, G, 'transformer.wpe.weight', T * C),
    dacts.view('dresidual'),
    { buffer: inputs },
    B,
    T,
    C,
    V,
  );
}

/**
 * From the loss to ∂L/∂(last block's output) in `dresidual`: dlogits = (softmax − onehot) / BT
 * over the logits, the tied head (its wte gradient into the stage's own wte: the copy on the last
 * stage of a pipeline), then ln_f.
 */
function bindHeadBackward(model: GptBuffers, lastResidual: TensorView): BoundKernel[] {
  const { B, T, kernels: k, params: P, grads: G, targets, acts, dacts, layout } = model;
  const { nEmbd: C, vocabSize: V } = model.config;
  const param = (buffer: GPUBuffer, name: string) => paramView(layout, buffer, name);
  const BT = B * T;
  const a = (name: string) => acts.view(name);
  const d = (name: string) => dacts.view(name);
  const dres = d('dresidual');
  return [
    k.vector.fill(dres, 0, BT * C),
    k.crossEntropy.backward({ logits: a('logits'), targets: { buffer: targets } }, BT, V),
    k.matmul.backwardInput({
      dinp: d('dlnf'),
      dout: a('logits'),
      weight: param(P, 'transformer.wte.weight'),
      N: BT,
      C,
      OC: V,
      accumulate: false,
    }),
    k.matmul.backwardWeight({
      dweight: param(G, 'transformer.wte.weight'),
      dout: a('logits'),
      inp: a('lnf'),
      N: BT,
      C,
      OC: V,
    }),
    k.layernorm.backward(
      dres,
      param(G, 'transformer.ln_f.weight'),
      param(G, 'transformer.ln_f.bias'),
      d('dlnf'),
      lastResidual,
      param(P, 'transformer.ln_f.weight'),
      a('lnfMean'),
      a('lnfRstd'),
      BT,
      C,
    ),
  ];
}

/**
 * The GPT-2 forward pass on WebGPU, bound once for one batch shape: embedding, L blocks of
 * (LayerNorm, attention, residual, LayerNorm, MLP, residual), final LayerNorm, the tied head and
 * the cross-entropy loss, the same plan as the CPU model's forward (cpu/gpt.ts). A pipeline
 * stage binds its part: the embedding only if it embeds (else its input is already in
 * `encoded`), its blocks, and the head only if it has it (else its output is its last block's
 * residual3).
 */
import type { BoundKernel } from '@shoal/gpu';
import { blockView, type GptBuffers, paramView } from './buffers.ts';

/** The forward pass's kernels, in dispatch order; the mean loss lands in `model.loss[0]`. */
export function bindForward(model: GptBuffers): BoundKernel[] {
  const { B, T, kernels: k, params: P, inputs, targets, loss, acts, layout, stage } = model;
  const { nEmbd: C, nHead: NH, vocabSize: V } = model.config;
  const param = (buffer: GPUBuffer, name: string, floats?: number) => paramView(layout, buffer, name, floats);
  const block = (buffer: GPUBuffer, l: number, suffix: string) => blockView(layout, buffer, l, suffix);
  const BT = B * T;
  const a = (name: string) => acts.view(name);
  const out: BoundKernel[] = [];
  if (stage.embeds) {
    out.push(
      k.embedding.forward(
        a('encoded'),
        { buffer: inputs },
        param(P, 'transformer.wte.weight'),
        param(P, 'transformer.wpe.weight', T * C),
        B,
        T,
        C,
      ),
    );
  }
  let residual = a('encoded');
  for (let l = stage.firstBlock; l < stage.endBlock; l++) {
    const w = (suffix: string) => block(P, l, suffix);
    const x = (name: string) => a(`${l}.${name}`);
    out.push(
      k.layernorm.forward(x('ln1'), x('ln1Mean'), x('ln1Rstd'), residual, w('ln_1.weight'), w('ln_1.bias'), BT, C),
      k.matmul.forward({
        out: x('qkv'),
        inp: x('ln1'),
        weight: w('attn.c_attn.weight'),
        bias: w('attn.c_attn.bias'),
        N: BT,
        C,
        OC: 3 * C,
      }),
      k.attention.forward({ qkv: x('qkv'), out: x('atty'), lse: x('lse') }, { B, T, C, NH }),
      k.matmul.forward({
        out: a('attproj'),
        inp: x('atty'),
        weight: w('attn.c_proj.weight'),
        bias: w('attn.c_proj.bias'),
        N: BT,
        C,
        OC: C,
      }),
      k.residual.forward(x('residual2'), residual, a('attproj'), BT * C),
      k.layernorm.forward(
        x('ln2'),
        x('ln2Mean'),
        x('ln2Rstd'),
        x('residual2'),
        w('ln_2.weight'),
        w('ln_2.bias'),
        BT,
        C,
      ),
      k.matmul.forward({
        out: x('fch'),
        inp: x('ln2'),
        weight: w('mlp.c_fc.weight'),
        bias: w('mlp.c_fc.bias'),
        N: BT,
        C,
        OC: 4 * C,
      }),
      k.gelu.forward(x('fchGelu'), x('fch'), BT * 4 * C),
      k.matmul.forward({
        out: a('fcproj'),
        inp: x('fchGelu'),
        weight: w('mlp.c_proj.weight'),
        bias: w('mlp.c_proj.bias'),
        N: BT,
        C: 4 * C,
        OC: C,
      }),
      k.residual.forward(x('residual3'), x('residual2'), a('fcproj'), BT * C),
    );
    residual = x('residual3');
  }
  if (!stage.head) return out;
  out.push(
    k.layernorm.forward(
      a('lnf'),
      a('lnfMean'),
      a('lnfRstd'),
      residual,
      param(P, 'transformer.ln_f.weight'),
      param(P, 'transformer.ln_f.bias'),
      BT,
      C,
    ),
    // Tied head: logits = lnf · wteᵀ, no bias.
    k.matmul.forward({
      out: a('logits'),
      inp: a('lnf'),
      weight: param(P, 'transformer.wte.weight'),
      N: BT,
      C,
      OC: V,
    }),
    k.crossEntropy.forward(
      {
        logits: a('logits'),
        targets: { buffer: targets },
        losses: a('losses'),
        meanLoss: { buffer: loss, size: 4 },
      },
      BT,
      V,
    ),
  );
  return out;
}

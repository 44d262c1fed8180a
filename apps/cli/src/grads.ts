/**
 * `shoal grads`: the gradient of the mean loss for every checkpoint tensor, for anyone checking
 * the engine against another framework.
 *
 *   shoal grads --checkpoint C.safetensors --tokens T.bin --batch B --seq S --out G.safetensors
 *               [--backend webgpu|cpu] [--json]
 *
 * T.bin holds B rows of S+1 little-endian int32 tokens: row b's inputs are its first S tokens,
 * its targets the last S. Bad input gets a one-line error, exit code 1 and no output file.
 */

import { buildLayout, type CheckpointError, CpuGpt, decodeWeights, writeSafetensors } from '@shoal/model';
import { readInput, writeAtomically } from './files.ts';
import { UsageError } from './usage.ts';

export interface GradsOptions {
  checkpoint: string;
  tokens: string;
  batch: number;
  seq: number;
  out: string;
  backend: 'webgpu' | 'cpu';
  json?: boolean;
}

/** Reads T.bin into inputs and targets, checking size and range. */
export function readTokenRows(bytes: Uint8Array, B: number, S: number, vocabSize: number) {
  const expected = 4 * B * (S + 1);
  if (bytes.length !== expected) {
    throw new UsageError(
      `tokens file has ${bytes.length} bytes; --batch ${B} --seq ${S} needs exactly 4·B·(S+1) = ${expected}`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const inputs = new Int32Array(B * S);
  const targets = new Int32Array(B * S);
  for (let b = 0; b < B; b++) {
    for (let s = 0; s <= S; s++) {
      const token = view.getInt32(4 * (b * (S + 1) + s), true);
      if (token < 0 || token >= vocabSize) {
        throw new UsageError(`token ${token} at row ${b}, position ${s} is outside [0, ${vocabSize})`);
      }
      if (s < S) inputs[b * S + s] = token;
      if (s > 0) targets[b * S + s - 1] = token;
    }
  }
  return { inputs, targets };
}

export async function gradsCommand(options: GradsOptions): Promise<void> {
  const started = performance.now();
  const { batch: B, seq: S } = options;
  let weights: ReturnType<typeof decodeWeights>;
  try {
    weights = decodeWeights(readInput(options.checkpoint, 'checkpoint'));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`checkpoint ${options.checkpoint}: ${(error as CheckpointError).message}`);
  }
  const { config, params } = weights;
  if (S > config.blockSize) throw new UsageError(`--seq ${S} exceeds the model's block_size ${config.blockSize}`);
  const { inputs, targets } = readTokenRows(readInput(options.tokens, 'tokens file'), B, S, config.vocabSize);
  const layout = buildLayout(config);

  let loss: number;
  let grads: Float32Array;
  let adapter: string | null = null;
  if (options.backend === 'cpu') {
    const model = new CpuGpt<Float32Array>(config, B, S, Float32Array);
    loss = model.forward(params, inputs, targets);
    grads = new Float32Array(layout.size);
    model.backward(params, grads);
  } else {
    const { gpuGradients } = await import('./grads-webgpu.ts');
    ({ loss, grads, adapter } = await gpuGradients(config, params, inputs, targets, B, S));
  }

  const tensors = layout.tensors.map((t) => ({
    name: t.name,
    shape: t.shape,
    data: grads.subarray(t.offset, t.offset + t.size),
  }));
  writeAtomically(options.out, writeSafetensors(tensors, { loss: String(loss), batch: String(B), seq: String(S) }));

  const seconds = (performance.now() - started) / 1000;
  if (options.json) {
    console.log(
      JSON.stringify({
        loss,
        backend: options.backend,
        adapter,
        batch: B,
        seq: S,
        tensors: tensors.length,
        out: options.out,
        seconds,
      }),
    );
  } else {
    console.log(
      `loss ${loss.toFixed(6)}; gradients of ${tensors.length} tensors written to ${options.out} (${adapter ?? options.backend}, ${seconds.toFixed(2)} s)`,
    );
  }
}

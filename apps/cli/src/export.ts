/**
 * `shoal export`: a checkpoint's model as ONNX, for onnxruntime (web, node, native) and any other
 * ONNX runtime.
 *
 *   shoal export --checkpoint C.safetensors --out model.onnx [--opset 17|20] [--json]
 *
 * The file takes `input_ids` int64 [batch, seq] (seq ≤ block_size) and gives `logits` float32
 * [batch, seq, vocab]; see packages/onnx. Bad input gets a one-line error, exit code 1 and no
 * output file.
 */
import type { CheckpointError } from '@shoal/model';
import { decodeWeights } from '@shoal/model';
import { DEFAULT_OPSET, exportOnnx, isSupportedOpset, SUPPORTED_OPSETS } from '@shoal/onnx/export';
import { readInput, writeAtomically } from './files.ts';
import { UsageError } from './usage.ts';

export interface ExportOptions {
  checkpoint: string;
  out: string;
  opset?: number;
  json?: boolean;
}

export async function exportCommand(options: ExportOptions): Promise<void> {
  const started = performance.now();
  const opset = options.opset ?? DEFAULT_OPSET;
  if (!isSupportedOpset(opset))
    throw new UsageError(`--opset ${opset} is not supported: choose ${SUPPORTED_OPSETS.join(' or ')}`);
  const bytes = readInput(options.checkpoint, 'checkpoint');
  let weights: ReturnType<typeof decodeWeights>;
  try {
    weights = decodeWeights(bytes);
  } catch (error) {
    const hint = options.checkpoint.endsWith('.state.safetensors')
      ? ' (that is a run-state file: export the weights, NAME.safetensors beside it)'
      : '';
    throw new UsageError(`checkpoint ${options.checkpoint}: ${(error as CheckpointError).message}${hint}`);
  }
  const { config, params } = weights;
  const model = exportOnnx(config, params, { opset });
  try {
    writeAtomically(options.out, model);
  } catch (error) {
    throw new UsageError(`cannot write ${options.out}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }

  if (options.json) {
    console.log(JSON.stringify({ out: options.out, bytes: model.length, opset, config }));
  } else {
    const seconds = (performance.now() - started) / 1000;
    const { nLayer, nHead, nEmbd, blockSize, vocabSize } = config;
    console.log(
      `wrote ${options.out} (${model.length} bytes, opset ${opset}): ${nLayer} layers, ${nHead} heads, ` +
        `n_embd ${nEmbd}, block_size ${blockSize}, vocab ${vocabSize}; input_ids int64 [batch, seq ≤ ${blockSize}] → ` +
        `logits float32 [batch, seq, ${vocabSize}] (${seconds.toFixed(2)} s)`,
    );
  }
}

/**
 * How fast is the TF.js competitor here? One TfjsTrainer step of the nano preset at B=16, T=64
 * (1,024 tokens) on TF.js's wasm and webgpu backends:
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/tfjs-probe.ts [--steps 10] [--warmup 3] [--backends wasm,webgpu]
 *
 * SHOAL_ADAPTER picks the WebGPU adapter as everywhere else. Every step's loss is checked against
 * our CpuTrainer run from the same init on the same batches, so a fast but wrong backend (or a
 * broken clip/AdamW) shows. Prints one line per backend and one JSON line.
 */
import { parseArgs } from 'node:util';
import { PRESETS } from '../packages/model/src/config.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { benchBatches, measureTfjsStep, type TfjsBackendName, type TfjsStepResult } from './tfjs.ts';

const { values: args } = parseArgs({
  options: {
    steps: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    backends: { type: 'string', default: 'wasm,webgpu' },
  },
});
const config = { ...PRESETS.nano };
const [B, T] = [16, 64];
const seed = 1337;
const lr = 1e-3;
const [warmup, steps] = [Number(args.warmup), Number(args.steps)];
const backends = (args.backends ?? '').split(',') as TfjsBackendName[];

// The losses TF.js should report: our CPU trainer on the same init, batches and learning rate.
const layout = buildLayout(config);
const cpu = new CpuTrainer(config, defaultTrainConfig({ batchSize: B, seqLen: T }), initParameters(layout, seed));
const referenceLosses: number[] = [];
for (const batch of benchBatches(config, B, T, warmup + steps, seed)) referenceLosses.push(await cpu.step(batch, lr));

console.log(`nano (${layout.size} parameters), B=${B} T=${T}: ${B * T} tokens per step`);
const results: (TfjsStepResult & { maxLossError: number })[] = [];
for (const backend of backends) {
  const result = await measureTfjsStep({ backend, config, B, T, warmup, steps, seed, lr });
  const maxLossError = Math.max(
    ...result.losses.map((loss, i) => Math.abs(loss - (referenceLosses[i] as number)) / (referenceLosses[i] as number)),
  );
  results.push({ ...result, maxLossError });
  console.log(
    `tfjs-${backend}: ${result.msPerStep.toFixed(1)} ms/step, ${Math.round(result.tokensPerSecond)} tokens/s ` +
      `on ${result.device}; losses ${result.firstLoss.toFixed(4)} → ${result.loss.toFixed(4)}, ` +
      `max relative difference from CpuTrainer ${maxLossError.toExponential(1)}`,
  );
  if (!(maxLossError < 1e-4)) throw new Error(`tfjs-${backend} disagrees with CpuTrainer on the losses`);
}
console.log(JSON.stringify({ bench: 'tfjs-step', preset: 'nano', B, T, lr, referenceLosses, results }));
// Dawn keeps the event loop alive while a device exists.
process.exit(0);

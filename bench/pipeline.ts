/**
 * Pipeline-parallel replicas: bubble fraction and activation bytes per step, GPipe
 * against 1F1B, f32 against bf16 activations, for S = 1 … 4 stages (S ≤ n_layer):
 *
 *   npm run bench:pipeline -- [--presets tiny,small] [--stages 1,2,3,4] [--schedules gpipe,1f1b]
 *     [--activations f32,bf16] [--batch 16] [--seq 128] [--micros M] [--steps 20] [--warmup 3]
 *     [--reps 7] [--lr 1e-3] [--links 100,1000] [--seed 1] [--no-check] [--json FILE]
 *
 * Per preset and S:
 *   1. each stage's forward and backward of one micro-batch (B/M rows × T) and its step's end
 *      (tied gradient, Σg², AdamW), timed on the CPU engine in the main thread, one stage at a
 *      time: median of --reps after one warm-up;
 *   2. the S stages as S worker threads passing activations and gradients over MessagePorts in
 *      the schedule's op order (scheduleOrder), --steps training steps from the same init and
 *      batches; step time and each stage's busy time (forward, backward, codec, step's end) are
 *      medians over the steps after --warmup, and the measured bubble is 1 − Σbusy / (S·step);
 *   3. the bytes the stages put on their links, checked against activationBytesPerStep;
 *   4. the loss after --steps steps (the last step's, and on held-out batches) with f32 and bf16
 *      passing; with f32 it must equal PipelineTrainer's in one thread bit for bit (--no-check
 *      skips that run).
 * Beside the measurement, simulateSchedule's model with the times of part 1 at free links and at
 * each of --links (Mbit/s, one message at a time per direction). Threads share this machine's
 * cores: with S above the core count the measured step is timeshared and each op's wall time
 * includes waiting for a core, so the model is the figure that carries over to S machines.
 * Values cross the links as the mesh stage sends them (packages/swarm/src/pipeline/wire-values.ts:
 * f32, or bf16 rounded to nearest even, checked below). Prints a table per preset and writes the
 * JSON (bench/format-json.ts) to --json. About 2 minutes on 2 cores with the defaults; small with
 * --steps 6 --warmup 2 --reps 3 --no-check about 5.5 (docs/pipeline-bench.md).
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { BatchSampler, loadMobyDick, splitCorpus } from '@shoal/data';
import { presetConfig } from '../packages/model/src/config.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import {
  activationBytesPerStep,
  idealBubble,
  PIPELINE_SCHEDULES,
  type PipelineSchedule,
  simulateSchedule,
} from '../packages/model/src/pipeline/schedule.ts';
import { PipelineTrainer, pipelineMicros } from '../packages/model/src/pipeline/trainer.ts';
import type { Batch } from '../packages/model/src/train/trainer.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { bytesPerValue, readValues, writeValues } from '../packages/swarm/src/pipeline/wire-values.ts';
import { formatJson } from './format-json.ts';
import { measureStageTimes, median, type StageSeconds } from './pipeline-compute.ts';
import { type PipelineRow, printPipelineTable } from './pipeline-report.ts';
import type { ActivationType } from './pipeline-stage.ts';
import { ThreadedPipeline, type ThreadedStep } from './pipeline-threads.ts';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'tiny' },
    stages: { type: 'string', default: '1,2,3,4' },
    schedules: { type: 'string', default: PIPELINE_SCHEDULES.join(',') },
    activations: { type: 'string', default: 'f32,bf16' },
    batch: { type: 'string', default: '16' },
    seq: { type: 'string' },
    micros: { type: 'string' },
    steps: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '3' },
    reps: { type: 'string', default: '7' },
    lr: { type: 'string', default: '1e-3' },
    links: { type: 'string', default: '100,1000' },
    seed: { type: 'string', default: '1' },
    'no-check': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const list = (value: string | undefined) => (value ?? '').split(',').filter(Boolean);
const batchSize = Number(args.batch);
const steps = Number(args.steps);
const warmup = Number(args.warmup);
const reps = Number(args.reps);
const lr = Number(args.lr);
const seed = Number(args.seed);
if (!(Number.isInteger(steps) && Number.isInteger(warmup) && warmup >= 0 && steps > warmup)) {
  throw new RangeError(`--steps (${args.steps}) must be above --warmup (${args.warmup})`);
}
const schedules = list(args.schedules).map((name) => {
  if (!(PIPELINE_SCHEDULES as readonly string[]).includes(name)) throw new RangeError(`--schedules: ${name}?`);
  return name as PipelineSchedule;
});
const activationTypes = list(args.activations).map((name) => {
  if (name !== 'f32' && name !== 'bf16') throw new RangeError(`--activations: f32 or bf16, got ${name}`);
  return name as ActivationType;
});
const links = list(args.links).map(Number);
checkBf16Rounding();

/** Throws unless the wire's bf16 rounds to nearest, ties to even, on values whose rounding is known. */
function checkBf16Rounding(): void {
  const cases: [number, number][] = [
    [1 + 2 ** -8, 1], // halfway between 1 and 1 + 2⁻⁷: ties to the even 1
    [1 + 3 * 2 ** -8, 1 + 2 ** -6], // halfway between 1 + 2⁻⁷ (odd) and 1 + 2⁻⁶: ties to the even
    [1 + 2 ** -8 + 2 ** -20, 1 + 2 ** -7], // just past halfway: up
    [-(1 + 2 ** -8 - 2 ** -20), -1], // just short of halfway: down, sign kept
  ];
  const bytes = new Uint8Array(2 * cases.length);
  writeValues(
    Float32Array.from(cases, ([x]) => x),
    'bf16',
    bytes,
    0,
  );
  const back = readValues(bytes, 0, cases.length, 'bf16');
  for (const [i, [x, expected]] of cases.entries()) {
    if (back[i] !== expected) throw new Error(`bf16 of ${x} reads back as ${back[i]}, expected ${expected}`);
  }
}

const cores = cpus().length;
const machine = `${cores} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}`;
const load = () => loadavg().map((x) => Number(x.toFixed(2)));
const loadAtStart = load();
// Other processes on these cores slow the measured steps; the load average says how many there were.
console.log(`pipeline benchmark: ${machine}; load average ${loadAtStart.join(' ')} (1, 5, 15 min)`);
const corpus = splitCorpus(loadMobyDick());
const started = performance.now();

const presets: Record<string, unknown>[] = [];
for (const preset of list(args.presets)) {
  const config = presetConfig(preset);
  const seqLen = args.seq ? Number(args.seq) : Math.min(128, config.blockSize);
  const train = defaultTrainConfig({ batchSize, seqLen, seed });
  const params = initParameters(buildLayout(config), seed);
  const sampler = new BatchSampler(corpus.train, { batchSize, seqLen, seed });
  const batches = Array.from({ length: steps }, () => sampler.next());
  const heldOut = new BatchSampler(corpus.validation, { batchSize, seqLen, seed });
  const validation = [heldOut.next(), heldOut.next()];
  const tokens = batchSize * seqLen;
  const stageCounts = list(args.stages)
    .map(Number)
    .filter((S) => S <= config.nLayer);
  console.log(
    `\n${preset} (L${config.nLayer} C${config.nEmbd}): batch ${batchSize} × T ${seqLen} = ${tokens} tokens a step, ` +
      `${steps} steps (timed after ${warmup}), lr ${lr}`,
  );

  const rows: PipelineRow[] = [];
  /** Per S, each stage's median ms (part 1), as simulateSchedule gets them. */
  const stageTimesMs: Record<number, Record<keyof StageSeconds, number[]>> = {};
  const checks: Record<string, unknown>[] = [];
  for (const S of stageCounts) {
    const M = pipelineMicros(batchSize, S, args.micros ? Number(args.micros) : undefined);
    const microBatch = batchSize / M;
    const measured = await measureStageTimes({
      config,
      train,
      params,
      stages: S,
      micros: M,
      batch: batches[0] as Batch,
      reps,
    });
    const toMs = (seconds: number[]) => seconds.map((x) => 1000 * x);
    stageTimesMs[S] = {
      forward: toMs(measured.forward),
      backward: toMs(measured.backward),
      optimizer: toMs(measured.optimizer),
    };
    const ms = (seconds: number[]) => seconds.map((x) => (1000 * x).toFixed(1)).join(' / ');
    console.log(
      `  S ${S}, M ${M} × ${microBatch} rows: per micro-batch forward ${ms(measured.forward)} ms, ` +
        `backward ${ms(measured.backward)} ms; step's end ${ms(measured.optimizer)} ms`,
    );
    const lossesBy = new Map<string, number[]>();
    for (const schedule of schedules) {
      for (const activations of S === 1 ? (['f32'] as const) : activationTypes) {
        const pipeline = ThreadedPipeline.create({
          config,
          train,
          params,
          stages: S,
          micros: M,
          schedule,
          activations,
        });
        const results: ThreadedStep[] = [];
        let validationLoss = Number.NaN;
        try {
          for (const batch of batches) results.push(await pipeline.step(batch, lr));
          validationLoss = await pipeline.evaluate(validation);
        } finally {
          await pipeline.destroy();
        }
        const timed = results.slice(warmup);
        const stepMs = median(timed.map((r) => r.stepMs));
        const busyOf = (r: ThreadedStep, s: number) => {
          const t = r.times[s];
          return t ? t.forwardMs + t.backwardMs + t.codecMs + t.optimizerMs : 0;
        };
        const bubble = median(
          timed.map((r) => 1 - r.times.reduce((sum, _, s) => sum + busyOf(r, s), 0) / (S * r.stepMs)),
        );
        const expectedBytes =
          S > 1
            ? activationBytesPerStep({
                stages: S,
                micros: M,
                microBatch,
                seqLen,
                channels: config.nEmbd,
                bytesPerValue: bytesPerValue(activations) as 2 | 4,
              })
            : 0;
        for (const r of results) {
          if (r.sentBytes !== expectedBytes) {
            throw new Error(
              `S ${S} ${schedule} ${activations}: ${r.sentBytes} bytes sent, activationBytesPerStep says ${expectedBytes}`,
            );
          }
        }
        const messageBytes = microBatch * seqLen * config.nEmbd * bytesPerValue(activations);
        const model = [0, ...links].map((mbps) =>
          simulateSchedule({
            schedule,
            forwardSeconds: measured.forward,
            backwardSeconds: measured.backward,
            optimizerSeconds: measured.optimizer,
            micros: M,
            transferSeconds: mbps > 0 ? (8 * messageBytes) / (mbps * 1e6) : 0,
          }),
        );
        const losses = results.map((r) => r.loss);
        lossesBy.set(`${schedule} ${activations}`, losses);
        rows.push({
          S,
          M,
          schedule,
          activations,
          stepMs,
          bestStepMs: Math.min(...timed.map((r) => r.stepMs)),
          bubble,
          modelStepMs: model.map((m) => 1000 * m.stepSeconds),
          modelBubble: model.map((m) => m.bubbleFraction),
          idealBubble: idealBubble(S, M),
          peakInFlight: results[0]?.peakInFlight ?? [],
          bytesPerStep: expectedBytes,
          bytesPerToken: expectedBytes / tokens,
          busyMs: (results[0]?.times ?? []).map((_, s) => median(timed.map((r) => busyOf(r, s)))),
          codecMs: (results[0]?.times ?? []).map((_, s) => median(timed.map((r) => r.times[s]?.codecMs ?? 0))),
          waitMs: (results[0]?.times ?? []).map((_, s) => median(timed.map((r) => r.times[s]?.waitMs ?? 0))),
          losses,
          validationLoss,
        });
        const peaks = results[0]?.peakInFlight.join('/');
        const modelPeaks = model[0]?.peakInFlight.join('/');
        if (peaks !== modelPeaks)
          throw new Error(`S ${S} ${schedule}: peak in-flight ${peaks}, the model says ${modelPeaks}`);
      }
    }
    // Every schedule computes the same thing: f32 losses must agree with each other and with one thread.
    const f32 = [...lossesBy.entries()].filter(([key]) => key.endsWith('f32'));
    const reference = f32[0]?.[1];
    for (const [key, losses] of f32) {
      if (losses.some((loss, i) => loss !== reference?.[i]))
        throw new Error(`S ${S}: ${key} losses differ from ${f32[0]?.[0]}`);
    }
    if (reference && !args['no-check']) {
      const inProcess = await PipelineTrainer.create(config, train, params, { stages: S, micros: M });
      const losses: number[] = [];
      for (const batch of batches) losses.push(await inProcess.step(batch, lr));
      inProcess.destroy();
      const maxDiff = Math.max(...losses.map((loss, i) => Math.abs(loss - (reference[i] ?? Number.NaN))));
      checks.push({ S, check: 'threaded f32 = PipelineTrainer', steps, maxLossDiff: maxDiff });
      if (maxDiff !== 0)
        throw new Error(`S ${S}: threaded f32 losses differ from PipelineTrainer's by up to ${maxDiff}`);
    }
  }

  printPipelineTable(preset, rows, { seqLen, links, cores });
  presets.push({
    preset,
    config,
    batchSize,
    seqLen,
    tokens,
    steps,
    warmup,
    reps,
    lr,
    links,
    stageTimesMs,
    checks,
    rows,
  });
}

const seconds = (performance.now() - started) / 1000;
const loadAtEnd = load();
const result = { bench: 'pipeline', machine, cores, loadAtStart, loadAtEnd, seconds, presets };
console.log(`\n${seconds.toFixed(0)} s; load average ${loadAtEnd.join(' ')}`);
if (args.json) writeFileSync(args.json, formatJson(result));

/**
 * What link does a room need? `shoal simulate --dry-run`s (no training: real messages, real
 * sizes, modelled compute) for each preset, method, link speed and H, reporting the workers'
 * compute utilisation (the fraction of simulated time spent computing rather than waiting on
 * rounds). Prints a table per preset and method and one JSON line (and writes it to --out).
 *
 * Each cell is two figures: the steady state, then the whole run of --rounds rounds of H. A
 * low-rank room's first round of each fragment is dense (its outer momentum, where the bases come
 * from, is still zero), a one-off that a slow link takes long to carry and a run of a few rounds
 * cannot amortise. The steady state leaves it out: a second run of --warm-rounds rounds (past the
 * first rounds and the waits on them) is subtracted, so
 * steady = (R − W)·H·step / (time of R rounds − time of W rounds).
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/bandwidth.ts [--presets small,base]
 *     [--methods streaming-fp4,dilocox] [--links 1,10,100] [--inner-steps 50,100,200]
 *     [--low-rank 16] [--low-rank-links 2,10] [--low-rank-inner-steps 25,50,100,200]
 *     [--workers 4] [--batch 16] [--gpu-tflops 10] [--rounds 6] [--warm-rounds 3]
 *     [--overlap max|<τ>] [--out x.json]
 *
 * Methods (simulate.ts): streaming-fp4 (dense, --codec); streaming-lowrank (the low-rank codec:
 * factors quantised with --codec); streaming-delay (the one-step delay, overlapRounds 1);
 * dilocox (both). The low-rank methods run on their own grid (--low-rank-links,
 * --low-rank-inner-steps), at a fixed rank (--low-rank, DEFAULT_LOW_RANK unless given; target 0):
 * a dry run trains nothing, so an adaptive rule would read zero errors and fall to rank 1.
 *
 * τ is H − 1 by default ("max"): a worker waits for a round's commit τ steps after contributing
 * (docs/design.md, "Bounded staleness"), so the overlap is what hides a round's traffic; a number
 * fixes τ for every H. With the one-step delay (overlapRounds 1) a round's update lands as a
 * correction H steps after the contribution, where the fragment's next round is due, and the
 * worker waits for it only there.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { dryRunInputs, type MethodName, simulateMethod } from '@shoal/sim';
import { type CodecName, DEFAULT_LOW_RANK } from '../packages/diloco/src/index.ts';
import { presetConfig } from '../packages/model/src/config.ts';

const METHODS = ['streaming-fp4', 'streaming-lowrank', 'streaming-delay', 'dilocox'] as const;
const LOW_RANK_METHODS = new Set<MethodName>(['streaming-lowrank', 'dilocox']);
const DELAY_METHODS = new Set<MethodName>(['streaming-delay', 'dilocox']);

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'small,base' },
    methods: { type: 'string', default: 'streaming-fp4,dilocox' },
    links: { type: 'string', default: '1,10,100' },
    'inner-steps': { type: 'string', default: '50,100,200' },
    'low-rank': { type: 'string', default: String(DEFAULT_LOW_RANK) },
    'low-rank-links': { type: 'string', default: '2,10' },
    'low-rank-inner-steps': { type: 'string', default: '25,50,100,200' },
    workers: { type: 'string', default: String(ROOM_MODEL_DEFAULTS.workers) },
    batch: { type: 'string', default: '16' },
    'gpu-tflops': { type: 'string', default: String(ROOM_MODEL_DEFAULTS.gpuTflops) },
    fragments: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '6' },
    // a fragment's first round is contributed at H (+ H/P for the later ones) and waited for at 2H
    'warm-rounds': { type: 'string', default: '3' },
    codec: { type: 'string', default: 'fp4' },
    overlap: { type: 'string', default: 'max' },
    out: { type: 'string' },
  },
});
const list = (value: string | undefined) => (value ?? '').split(',').filter(Boolean);
const workers = Number(args.workers);
const batch = Number(args.batch);
const rounds = Number(args.rounds);
const warmRounds = Number(args['warm-rounds']);
if (!(warmRounds >= 1 && warmRounds < rounds)) throw new RangeError('--warm-rounds must be ≥ 1 and below --rounds');
const rank = Number(args['low-rank']);
const codec = args.codec as CodecName;
const methods = list(args.methods).map((name) => {
  if (!(METHODS as readonly string[]).includes(name)) {
    throw new RangeError(`--methods: ${name} is not one of ${METHODS.join(', ')}`);
  }
  return name as MethodName;
});
const overlapFor = (H: number) => (args.overlap === 'max' ? H - 1 : Math.min(H - 1, Number(args.overlap)));

/** What a method's table says it ran. */
function methodLabel(method: MethodName): string {
  const parts = [LOW_RANK_METHODS.has(method) ? `rank ${rank} (fixed) factors in ${codec}` : codec];
  if (DELAY_METHODS.has(method)) parts.push('one-step delay');
  return `${method}: ${parts.join(', ')}`;
}

const rows: Record<string, number | string | null>[] = [];
for (const preset of list(args.presets)) {
  const model = presetConfig(preset);
  const seqLen = model.blockSize;
  console.log(
    `\n${preset}: ${workers} workers × ${batch}×${seqLen} tokens per step, ${args['gpu-tflops']} TFLOP/s, ` +
      `P ${args.fragments}, τ ${args.overlap === 'max' ? 'H − 1' : args.overlap}; compute utilisation`,
  );
  for (const method of methods) {
    const lowRank = LOW_RANK_METHODS.has(method);
    const links = list(lowRank ? args['low-rank-links'] : args.links).map(Number);
    console.log(`\n${methodLabel(method)}`);
    console.log(`H      ${links.map((l) => `${l} Mbit/s`.padStart(18)).join('')}    (steady / whole run)`);
    for (const H of list(lowRank ? args['low-rank-inner-steps'] : args['inner-steps']).map(Number)) {
      const cells: string[] = [];
      for (const link of links) {
        const started = performance.now();
        const run = (R: number) =>
          simulateMethod(method, {
            preset,
            workers,
            batch,
            seqLen,
            lr: 1e-3,
            innerSteps: H,
            fragments: Number(args.fragments),
            overlap: overlapFor(H),
            alpha: 0.5,
            codec,
            ...(lowRank ? { lowRank: { rank, target: 0 } } : {}),
            tokens: R * H * workers * batch * seqLen,
            seed: 1,
            gpuTflops: Number(args['gpu-tflops']),
            linkMbps: link,
            latencyMs: ROOM_MODEL_DEFAULTS.latencyMs,
            ...dryRunInputs(seqLen),
          });
        const result = await run(rounds);
        const warm = await run(warmRounds);
        // every worker trains R·H steps, so a run's training time is R·H·step / utilisation
        const steady =
          (rounds - warmRounds) / (rounds / result.computeUtilization - warmRounds / warm.computeUtilization);
        const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
        cells.push(`${percent(steady)} / ${percent(result.computeUtilization)}`.padStart(18));
        rows.push({
          preset,
          method,
          codec,
          lowRank: lowRank ? rank : null,
          overlapRounds: DELAY_METHODS.has(method) ? 1 : 0,
          innerSteps: H,
          overlap: overlapFor(H),
          linkMbps: link,
          steadyUtilization: steady,
          computeUtilization: result.computeUtilization,
          warmUtilization: warm.computeUtilization,
          bytesPerWorker: result.bytesPerWorker,
          peakSyncBytes: result.peakSyncBytes,
          simSeconds: result.simSeconds,
          committedRounds: result.committedRounds,
          abortedRounds: result.abortedRounds + warm.abortedRounds,
          realSeconds: (performance.now() - started) / 1000,
        });
      }
      console.log(`${String(H).padEnd(7)}${cells.join('')}`);
    }
  }
}
const summary = JSON.stringify({ bench: 'bandwidth', workers, batch, rounds, warmRounds, rows });
console.log(summary);
if (args.out) writeFileSync(args.out, `${summary}\n`);

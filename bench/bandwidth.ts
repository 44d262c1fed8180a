/**
 * What link does a room need? `shoal simulate --dry-run` of streaming-fp4 (no training: real
 * messages, real sizes, modelled compute) for each preset, link speed and H, reporting the
 * workers' compute utilisation (the fraction of simulated time spent computing rather than
 * waiting on rounds). Prints a table per preset and one JSON line.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/bandwidth.ts [--presets small,base]
 *     [--links 1,10,100] [--inner-steps 50,100,200] [--workers 4] [--batch 16] [--gpu-tflops 10]
 *     [--rounds 6] [--overlap max|<τ>]
 *
 * τ is H − 1 by default ("max"): a worker waits for a round's commit τ steps after contributing
 * (docs/design.md, "Bounded staleness"), so the overlap is what hides a round's traffic; a number
 * fixes τ for every H.
 */
import { parseArgs } from 'node:util';
import { presetConfig } from '../packages/model/src/config.ts';
import { ROOM_MODEL_DEFAULTS } from '../packages/swarm/src/room-model-defaults.ts';
import { dryRunInputs, simulateMethod } from '../packages/swarm/src/simulate.ts';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'small,base' },
    links: { type: 'string', default: '1,10,100' },
    'inner-steps': { type: 'string', default: '50,100,200' },
    workers: { type: 'string', default: String(ROOM_MODEL_DEFAULTS.workers) },
    batch: { type: 'string', default: '16' },
    'gpu-tflops': { type: 'string', default: String(ROOM_MODEL_DEFAULTS.gpuTflops) },
    fragments: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '6' },
    codec: { type: 'string', default: 'fp4' },
    overlap: { type: 'string', default: 'max' },
  },
});
const list = (value: string | undefined) => (value ?? '').split(',').filter(Boolean);
const workers = Number(args.workers);
const batch = Number(args.batch);
const rounds = Number(args.rounds);
const overlapFor = (H: number) => (args.overlap === 'max' ? H - 1 : Math.min(H - 1, Number(args.overlap)));
const rows: Record<string, number | string>[] = [];
for (const preset of list(args.presets)) {
  const model = presetConfig(preset);
  const seqLen = model.blockSize;
  console.log(
    `\n${preset}: ${workers} workers × ${batch}×${seqLen} tokens per step, ${args['gpu-tflops']} TFLOP/s, ` +
      `P ${args.fragments}, τ ${args.overlap === 'max' ? 'H − 1' : args.overlap}, ${args.codec}; compute utilisation of streaming-${args.codec}`,
  );
  const links = list(args.links).map(Number);
  console.log(`H      ${links.map((l) => `${l} Mbit/s`.padStart(12)).join('')}`);
  for (const H of list(args['inner-steps']).map(Number)) {
    const cells: string[] = [];
    for (const link of links) {
      const started = performance.now();
      const result = await simulateMethod('streaming-fp4', {
        preset,
        workers,
        batch,
        seqLen,
        lr: 1e-3,
        innerSteps: H,
        fragments: Number(args.fragments),
        overlap: overlapFor(H),
        alpha: 0.5,
        codec: args.codec as 'fp4',
        tokens: rounds * H * workers * batch * seqLen,
        seed: 1,
        gpuTflops: Number(args['gpu-tflops']),
        linkMbps: link,
        latencyMs: ROOM_MODEL_DEFAULTS.latencyMs,
        ...dryRunInputs(seqLen),
      });
      cells.push(`${(100 * result.computeUtilization).toFixed(1)}%`.padStart(12));
      rows.push({
        preset,
        innerSteps: H,
        overlap: overlapFor(H),
        linkMbps: link,
        computeUtilization: result.computeUtilization,
        bytesPerWorker: result.bytesPerWorker,
        peakSyncBytes: result.peakSyncBytes,
        simSeconds: result.simSeconds,
        committedRounds: result.committedRounds,
        realSeconds: (performance.now() - started) / 1000,
      });
    }
    console.log(`${String(H).padEnd(7)}${cells.join('')}`);
  }
}
console.log(JSON.stringify({ bench: 'bandwidth', workers, batch, rows }));

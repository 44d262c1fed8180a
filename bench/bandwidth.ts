/**
 * What link does a room need? `shoal simulate --dry-run` of streaming-fp4 (no training: real
 * messages, real sizes, modelled compute) for each preset, link speed and H, reporting the
 * workers' compute utilisation (the fraction of simulated time spent computing rather than
 * waiting on rounds). Prints a table per preset and one JSON line.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/bandwidth.ts [--presets small,base]
 *     [--links 1,10,100] [--inner-steps 50,100,200] [--workers 4] [--batch 16] [--gpu-tflops 10]
 *     [--rounds 2]
 */
import { parseArgs } from 'node:util';
import { presetConfig } from '../packages/model/src/config.ts';
import { simulateMethod } from '../packages/swarm/src/simulate.ts';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'small,base' },
    links: { type: 'string', default: '1,10,100' },
    'inner-steps': { type: 'string', default: '50,100,200' },
    workers: { type: 'string', default: '4' },
    batch: { type: 'string', default: '16' },
    'gpu-tflops': { type: 'string', default: '10' },
    fragments: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '6' },
    codec: { type: 'string', default: 'fp4' },
  },
});
const list = (value: string | undefined) => (value ?? '').split(',').filter(Boolean);
const workers = Number(args.workers);
const batch = Number(args.batch);
const rounds = Number(args.rounds);
const rows: Record<string, number | string>[] = [];
for (const preset of list(args.presets)) {
  const model = presetConfig(preset);
  const seqLen = model.blockSize;
  console.log(
    `\n${preset}: ${workers} workers × ${batch}×${seqLen} tokens per step, ${args['gpu-tflops']} TFLOP/s, ` +
      `P ${args.fragments}, τ 2, ${args.codec}; compute utilisation of streaming-${args.codec}`,
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
        overlap: 2,
        alpha: 0.5,
        codec: args.codec as 'fp4',
        tokens: rounds * H * workers * batch * seqLen,
        seed: 1,
        gpuTflops: Number(args['gpu-tflops']),
        linkMbps: link,
        latencyMs: 50,
        dryRun: true,
        createTrainer: () => Promise.reject(new Error('a dry run trains nothing')),
        trainTokens: new Uint8Array(seqLen * 64),
        evalBatches: [],
      });
      cells.push(`${(100 * result.computeUtilization).toFixed(1)}%`.padStart(12));
      rows.push({
        preset,
        innerSteps: H,
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

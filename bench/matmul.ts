/**
 * GFLOP/s of the matmul family on square problems (N = C = OC = size), for each product:
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/matmul.ts [--kernel tiled,register]
 *       [--workgroup 16x16] [--tile-k 16] [--sizes 256,512] [--rounds 3]
 *       [--search 1024x768x3072 [--search-budget 4]]
 *
 * --kernel lists the kernels to time (plan.ts; default: every one the adapter runs), each with
 * its default tiles unless --workgroup / --tile-k set them; --rounds alternates them that many
 * times and adds a table of medians (for a machine shared with other work). --search also runs the per-adapter
 * tile search (tune.ts) at a layer shape N×C×OC and prints what each candidate measured (within a
 * budget in seconds, compilation included; default 4).
 * SHOAL_ADAPTER picks the adapter as in the tests. Times come from timestamp queries around a
 * compute pass of repeated dispatches when the adapter has 'timestamp-query', else from the
 * wall clock around onSubmittedWorkDone. Before a size is timed, its kernels run untimed for a
 * warm-up (see warmUp). Prints a table per kernel and one JSON line.
 */
import { parseArgs } from 'node:util';
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import type { BoundKernel } from '../packages/gpu/src/kernel.ts';
import { MatmulKernels } from '../packages/gpu/src/matmul/matmul.ts';
import { MATMUL_KERNEL_NAMES, type MatmulKernelName } from '../packages/gpu/src/matmul/plan.ts';
import { bindLayer, configName, layerOperands, tuneMatmul } from '../packages/gpu/src/matmul/tune.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';
import { DispatchTimer } from './timing.ts';

const { values: args } = parseArgs({
  options: {
    kernel: { type: 'string' },
    workgroup: { type: 'string' },
    'tile-k': { type: 'string' },
    sizes: { type: 'string' },
    search: { type: 'string' },
    'search-budget': { type: 'string' },
    rounds: { type: 'string' },
  },
});
const [workgroupX, workgroupY] = args.workgroup ? (args.workgroup.split('x').map(Number) as [number, number]) : [];
const tileK = args['tile-k'] ? Number(args['tile-k']) : undefined;

const gpu = await acquireGpu();
const { device, report } = gpu;
const sizes = args.sizes?.split(',').map(Number) ?? (report.isSoftware ? [256, 512, 1024] : [256, 512, 1024, 4096]);
const names = (args.kernel?.split(',') ?? MATMUL_KERNEL_NAMES) as MatmulKernelName[];
const timer = new DispatchTimer(device);
const gflops = (kernel: BoundKernel, flops: number) => timer.rate(kernel, flops);

/**
 * Runs a size's kernels untimed for `seconds` (at least twice each). On an H200 the first kernel
 * timed after a pause (buffers filled on the CPU, pipelines compiled) read a third of its
 * siblings' rate with one warm-up dispatch: a GPU that idled runs at low clocks for a while, and
 * the first dispatches of a pipeline on fresh buffers pay for first use. Warming every kernel of
 * the size together before timing any of them keeps the pause out of the measurement.
 */
async function warmUp(kernels: BoundKernel[], seconds: number): Promise<void> {
  const started = performance.now();
  for (let round = 0; round < 2 || performance.now() - started < seconds * 1000; round++) {
    for (const kernel of kernels) await timer.seconds(kernel, 1 + round);
  }
}

console.log(formatAdapter(report));
console.log(`timing: ${timer.method}`);
const results: Record<string, number | string>[] = [];
const tilesByKernel: Record<string, unknown> = {};
const families: [MatmulKernelName, MatmulKernels][] = [];
for (const name of names) {
  const options = { kernel: name, workgroupX, workgroupY, tileK };
  try {
    families.push([name, await MatmulKernels.create(device, options)]);
  } catch (error) {
    if (args.kernel !== undefined) throw error;
    console.log(`\n${name}: not run here (${(error as Error).message})`);
  }
}
// On a shared or noisy machine, --rounds alternates the kernels R times and reports medians.
const rounds = Math.max(1, Number(args.rounds ?? 1));
for (let round = 1; round <= rounds; round++) {
  for (const [name, kernels] of families) {
    const { tiles } = kernels;
    tilesByKernel[name] = tiles;
    console.log(
      `\n${name}${rounds > 1 ? ` (round ${round})` : ''}: tiles ${tiles.tileM}×${tiles.tileN}×${tiles.tileK}, ${tiles.workgroupX}×${tiles.workgroupY} invocations`,
    );
    console.log('size   forward  backwardInput  backwardWeight   (GFLOP/s)');
    await benchSizes(kernels, name, round);
  }
}
for (const [, kernels] of families) kernels.destroy();
const medians: Record<string, number | string>[] = [];
if (rounds > 1) {
  const median = (values: number[]) => {
    const sorted = [...values].sort((x, y) => x - y);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  };
  console.log(`\nmedians of ${rounds} rounds (GFLOP/s)`);
  console.log('kernel            size   forward  backwardInput  backwardWeight');
  for (const [name] of families) {
    for (const size of sizes) {
      const rows = results.filter((r) => r.kernel === name && r.size === size);
      const row: Record<string, number | string> = { kernel: name, size };
      for (const product of ['forward', 'backwardInput', 'backwardWeight']) {
        row[product] = Number(median(rows.map((r) => r[product] as number)).toFixed(2));
      }
      medians.push(row);
      console.log(
        `${name.padEnd(17)} ${String(size).padEnd(6)} ${String(row.forward).padStart(8)} ${String(row.backwardInput).padStart(14)} ${String(row.backwardWeight).padStart(15)}`,
      );
    }
  }
}

async function benchSizes(kernels: MatmulKernels, name: string, round: number) {
  for (const size of sizes) {
    const [N, C, OC] = [size, size, size];
    const shape = { N, C, OC };
    const t = layerOperands(device, shape, 'MatmulBench');
    const bound = bindLayer(kernels, t, shape);
    const flops = 2 * N * C * OC;
    await warmUp(Object.values(bound), report.isSoftware ? 0.3 : 0.5);
    const row: Record<string, number | string> = { kernel: name, size, ...(rounds > 1 ? { round } : {}) };
    for (const [name, kernel] of Object.entries(bound)) row[name] = Number((await gflops(kernel, flops)).toFixed(2));
    results.push(row);
    console.log(
      `${String(size).padEnd(6)} ${String(row.forward).padStart(8)} ${String(row.backwardInput).padStart(14)} ${String(row.backwardWeight).padStart(15)}`,
    );
    for (const kernel of Object.values(bound)) kernel.destroy();
    for (const b of Object.values(t)) b.destroy();
  }
}

let search: Record<string, unknown> | undefined;
if (args.search) {
  const [N, C, OC] = args.search.split('x').map(Number) as [number, number, number];
  const budgetMs = args['search-budget'] ? Number(args['search-budget']) * 1000 : undefined;
  const tuned = await tuneMatmul(device, gpu.adapter.info, { shape: { N, C, OC }, ...(budgetMs ? { budgetMs } : {}) });
  console.log(`\ntile search at ${N}×${C}→${OC}: ${configName(tuned.config)}`);
  for (const r of tuned.results) {
    const what = r.seconds !== undefined ? `${(r.seconds * 1000).toFixed(3)} ms` : `refused: ${r.refused}`;
    console.log(`  ${configName(r.config).padEnd(28)} ${what}`);
  }
  search = { shape: { N, C, OC }, chosen: tuned.config, candidates: tuned.results };
  tuned.kernels.destroy();
}
console.log(
  JSON.stringify({
    bench: 'matmul',
    adapter: formatAdapter(report),
    timing: timer.method,
    tiles: tilesByKernel,
    results,
    ...(rounds > 1 ? { rounds, medians } : {}),
    ...(search ? { search } : {}),
  }),
);
gpu.destroy();

/**
 * GFLOP/s of the matmul family on square problems (N = C = OC = size), for each product:
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/matmul.ts [--workgroup 16x16] [--tile-k 16] [--sizes 256,512]
 *
 * SHOAL_ADAPTER picks the adapter as in the tests. Times come from timestamp queries around a
 * compute pass of repeated dispatches when the adapter has 'timestamp-query', else from the
 * wall clock around onSubmittedWorkDone. Prints a table and one JSON line.
 */
import { parseArgs } from 'node:util';
import { createStorageBuffer } from '../packages/gpu/src/buffers.ts';
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import type { BoundKernel } from '../packages/gpu/src/kernel.ts';
import { MatmulKernels } from '../packages/gpu/src/matmul/matmul.ts';
import { randomFloats } from '../packages/gpu/src/random.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';

const { values: args } = parseArgs({
  options: {
    workgroup: { type: 'string', default: '16x16' },
    'tile-k': { type: 'string', default: '16' },
    sizes: { type: 'string' },
  },
});
const [workgroupX, workgroupY] = (args.workgroup ?? '16x16').split('x').map(Number) as [number, number];
const tileK = Number(args['tile-k']);

const gpu = await acquireGpu();
const { device, report } = gpu;
const sizes = args.sizes?.split(',').map(Number) ?? (report.isSoftware ? [256, 512, 1024] : [256, 512, 1024, 4096]);
const kernels = await MatmulKernels.create(device, { workgroupX, workgroupY, tileK });
const useTimestamps = device.features.has('timestamp-query');

/** Seconds for `reps` dispatches of `kernel` in one compute pass. */
async function time(kernel: BoundKernel, reps: number): Promise<number> {
  const encoder = device.createCommandEncoder({ label: 'MatmulBench.encoder' });
  let querySet: GPUQuerySet | undefined;
  let resolve: GPUBuffer | undefined;
  let readback: GPUBuffer | undefined;
  if (useTimestamps) {
    querySet = device.createQuerySet({ label: 'MatmulBench.querySet', type: 'timestamp', count: 2 });
    resolve = device.createBuffer({
      label: 'MatmulBench.resolve',
      size: 16,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    readback = device.createBuffer({
      label: 'MatmulBench.readback',
      size: 16,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }
  const pass = encoder.beginComputePass({
    label: 'MatmulBench.pass',
    ...(querySet ? { timestampWrites: { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {}),
  });
  for (let i = 0; i < reps; i++) kernel.dispatch(pass);
  pass.end();
  if (querySet && resolve && readback) {
    encoder.resolveQuerySet(querySet, 0, 2, resolve, 0);
    encoder.copyBufferToBuffer(resolve, 0, readback, 0, 16);
  }
  const start = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  const wall = (performance.now() - start) / 1000;
  if (!readback) return wall;
  await readback.mapAsync(GPUMapMode.READ);
  const [begin, end] = new BigInt64Array(readback.getMappedRange().slice(0));
  readback.destroy();
  resolve?.destroy();
  querySet?.destroy();
  const seconds = Number((end as bigint) - (begin as bigint)) / 1e9;
  // Some drivers report zero or garbage timestamps; fall back to the wall clock then.
  return seconds > 0 && seconds < wall * 2 ? seconds : wall;
}

/** GFLOP/s of one bound kernel doing `flops` per dispatch: warm up, then ~0.5 s of repeats. */
async function gflops(kernel: BoundKernel, flops: number): Promise<number> {
  const once = await time(kernel, 1);
  const reps = Math.max(2, Math.min(200, Math.ceil(0.5 / Math.max(once, 1e-6))));
  return (flops * reps) / (await time(kernel, reps)) / 1e9;
}

console.log(`${formatAdapter(report)}; tiles ${kernels.tiles.tileM}×${kernels.tiles.tileN}×${tileK}`);
console.log(`timing: ${useTimestamps ? 'timestamp queries' : 'wall clock'}`);
console.log('size   forward  backwardInput  backwardWeight   (GFLOP/s)');
const results: Record<string, number | string>[] = [];
for (const size of sizes) {
  const [N, C, OC] = [size, size, size];
  const buffer = (name: string, floats: number) =>
    createStorageBuffer(device, `MatmulBench.${name}`, randomFloats(floats, floats));
  const t = {
    inp: buffer('inp', N * C),
    weight: buffer('weight', OC * C),
    bias: buffer('bias', OC),
    out: buffer('out', N * OC),
    dinp: buffer('dinp', N * C),
    dweight: buffer('dweight', OC * C),
    dbias: buffer('dbias', OC),
  };
  const v = (b: GPUBuffer) => ({ buffer: b });
  const bound = {
    forward: kernels.forward({ out: v(t.out), inp: v(t.inp), weight: v(t.weight), bias: v(t.bias), N, C, OC }),
    backwardInput: kernels.backwardInput({ dinp: v(t.dinp), dout: v(t.out), weight: v(t.weight), N, C, OC }),
    backwardWeight: kernels.backwardWeight({
      dweight: v(t.dweight),
      dbias: v(t.dbias),
      dout: v(t.out),
      inp: v(t.inp),
      N,
      C,
      OC,
    }),
  };
  const flops = 2 * N * C * OC;
  const row: Record<string, number | string> = { size };
  for (const [name, kernel] of Object.entries(bound)) row[name] = Number((await gflops(kernel, flops)).toFixed(2));
  results.push(row);
  console.log(
    `${String(size).padEnd(6)} ${String(row.forward).padStart(8)} ${String(row.backwardInput).padStart(14)} ${String(row.backwardWeight).padStart(15)}`,
  );
  for (const kernel of Object.values(bound)) kernel.destroy();
  for (const b of Object.values(t)) b.destroy();
}
console.log(
  JSON.stringify({
    bench: 'matmul',
    adapter: formatAdapter(report),
    timing: useTimestamps ? 'timestamp' : 'wall',
    tiles: kernels.tiles,
    results,
  }),
);
kernels.destroy();
gpu.destroy();

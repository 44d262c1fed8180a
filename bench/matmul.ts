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
import { DispatchTimer } from './timing.ts';

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
const timer = new DispatchTimer(device);
const gflops = (kernel: BoundKernel, flops: number) => timer.rate(kernel, flops);

console.log(`${formatAdapter(report)}; tiles ${kernels.tiles.tileM}×${kernels.tiles.tileN}×${tileK}`);
console.log(`timing: ${timer.method}`);
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
    timing: timer.method,
    tiles: kernels.tiles,
    results,
  }),
);
kernels.destroy();
gpu.destroy();

/**
 * Attention alone: forward and backward TFLOP/s of each attention strategy at a few shapes.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/attention.ts [--strategies rows,tiled,register,register-memory] [--shapes 'B,T,NH,hs;…']
 *
 * SHOAL_ADAPTER picks the adapter as in the tests. FLOPs count the causal half only:
 * forward 2·B·C·T·(T+1) (q·k and p·v over the visible keys), backward 2.5× that (q·k again,
 * dout·v, and the three products dq, dk, dv), as bench:engine counts them. Times come from
 * timestamp queries where the adapter has them (bench/timing.ts). Prints a table and one JSON line.
 */
import { parseArgs } from 'node:util';
import { AttentionKernels, type AttentionStrategy } from '../packages/gpu/src/attention/attention.ts';
import { createStorageBuffer } from '../packages/gpu/src/buffers.ts';
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import { randomFloats } from '../packages/gpu/src/random.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';
import { DispatchTimer } from './timing.ts';

const { values: args } = parseArgs({
  options: {
    strategies: { type: 'string' },
    shapes: { type: 'string' },
    budget: { type: 'string', default: '1' },
  },
});

const gpu = await acquireGpu();
const { device, report } = gpu;
// Software adapters run at 0.2–2 GFLOP/s: small shapes there; GPT-2's head size 64 at T 1024 on a GPU.
const defaultShapes = report.isSoftware
  ? '1,128,4,16;1,128,4,32;1,256,2,64'
  : '8,1024,12,64;8,512,12,64;16,256,12,64;16,64,4,16';
const shapes = (args.shapes ?? defaultShapes).split(';').map((s) => {
  const [B, T, NH, hs] = s.split(',').map(Number) as [number, number, number, number];
  return { B, T, NH, hs };
});
// `register-memory`: the register kernels with the forward's reductions in workgroup memory.
const strategies = (args.strategies ?? 'rows,tiled,register').split(',') as (AttentionStrategy | 'register-memory')[];
// Dispatches first compile there (lavapipe): perDispatch's warm-up dispatch absorbs it.
const budget = Number(args.budget);
const timer = new DispatchTimer(device);

console.log(formatAdapter(report));
console.log(`timing: ${timer.method}; TFLOP/s of the causal half`);
console.log('shape                 strategy   default  subgroups  forward ms  TFLOP/s  backward ms  TFLOP/s');
const results: Record<string, number | string | boolean>[] = [];
for (const { B, T, NH, hs } of shapes) {
  const C = NH * hs;
  const buffer = (name: string, floats: number, seed: number) =>
    createStorageBuffer(device, `AttentionBench.${name}`, randomFloats(floats, seed, -1, 1));
  const t = {
    qkv: buffer('qkv', B * T * 3 * C, 1),
    out: buffer('out', B * T * C, 2),
    lse: buffer('lse', B * NH * T, 3),
    dout: buffer('dout', B * T * C, 4),
    dqkv: buffer('dqkv', B * T * 3 * C, 5),
  };
  const v = (b: GPUBuffer) => ({ buffer: b });
  const shape = { B, T, C, NH };
  const forwardFlops = 2 * B * C * T * (T + 1);
  const fallback = (await AttentionKernels.create(device, hs)).strategy;
  for (const strategy of strategies) {
    let kernels: AttentionKernels;
    try {
      kernels =
        strategy === 'register-memory'
          ? await AttentionKernels.create(device, hs, 'register', { subgroups: false })
          : await AttentionKernels.create(device, hs, strategy);
    } catch (error) {
      console.log(`B${B} T${T} NH${NH} hs${hs}`.padEnd(22), strategy.padEnd(10), `n/a: ${(error as Error).message}`);
      continue;
    }
    const forward = kernels.forward({ qkv: v(t.qkv), out: v(t.out), lse: v(t.lse) }, shape);
    const backward = kernels.backward(
      { qkv: v(t.qkv), out: v(t.out), lse: v(t.lse), dout: v(t.dout), dqkv: v(t.dqkv) },
      shape,
    );
    const forwardSeconds = await timer.perDispatch(forward, budget);
    const backwardSeconds = await timer.perDispatch(backward, budget);
    const row = {
      B,
      T,
      NH,
      hs,
      strategy,
      default: strategy === fallback,
      subgroups: kernels.subgroups,
      forwardMs: Number((forwardSeconds * 1e3).toFixed(3)),
      forwardTflops: Number((forwardFlops / forwardSeconds / 1e12).toPrecision(3)),
      backwardMs: Number((backwardSeconds * 1e3).toFixed(3)),
      backwardTflops: Number(((2.5 * forwardFlops) / backwardSeconds / 1e12).toPrecision(3)),
    };
    results.push(row);
    console.log(
      `B${B} T${T} NH${NH} hs${hs}`.padEnd(22),
      strategy.padEnd(10),
      (row.default ? 'yes' : '').padEnd(7),
      (row.subgroups ? 'yes' : '').padEnd(10),
      String(row.forwardMs).padStart(11),
      String(row.forwardTflops).padStart(8),
      String(row.backwardMs).padStart(12),
      String(row.backwardTflops).padStart(8),
    );
    forward.destroy();
    backward.destroy();
  }
  for (const b of Object.values(t)) b.destroy();
}
console.log(JSON.stringify({ bench: 'attention', adapter: formatAdapter(report), timing: timer.method, results }));
gpu.destroy();

/**
 * The kernel table part: every kernel family at the plan's model shapes and square matmuls
 * (bench/gpu-kernels.ts, as bench:engine), per dispatch, in TFLOP/s and GB/s; on a GPU the square
 * matmuls also with each tile config of the per-adapter search (matmul/tune.ts).
 */
import { acquireGpu } from '../../packages/gpu/src/device.node.ts';
import { CANDIDATES, configName, unsupported } from '../../packages/gpu/src/matmul/tune.ts';
import { formatAdapter } from '../../packages/gpu/src/report.ts';
import { benchKernels, benchSquareMatmul, createGpuBench, type KernelRow } from '../gpu-kernels.ts';
import type { PartOutput } from './output.ts';
import type { DevicePlan } from './plan.ts';

export interface KernelTableRow extends KernelRow {
  tflops?: number;
}

export interface KernelsPart {
  adapter?: string;
  timing?: string;
  rows: KernelTableRow[];
  skipped?: string[];
  /** The search's tile configs not timed at the square sizes, and why. */
  candidatesLeft?: string[];
}

const withTflops = (rows: KernelRow[]): KernelTableRow[] =>
  rows.map((r) => (r.gflops === undefined ? r : { ...r, tflops: r.gflops / 1000 }));

export async function kernelsPart(out: PartOutput<KernelsPart>, plan: DevicePlan, deadline: number): Promise<boolean> {
  const gpu = await acquireGpu();
  const rows: KernelTableRow[] = [];
  const skipped: string[] = [];
  // tile configs not timed (not offered here, or no time left): reported, the part still passes
  const candidatesLeft: string[] = [];
  try {
    const ctx = await createGpuBench(gpu.device, gpu.report.isSoftware, plan.kernelSeconds);
    out.update({ adapter: formatAdapter(gpu.report), timing: ctx.timer.method });
    for (const shape of plan.kernels) {
      const label = `${shape.name} B${shape.B} T${shape.T}`;
      if (performance.now() > deadline) {
        skipped.push(label);
        continue;
      }
      rows.push(...withTflops(await benchKernels(ctx, label, shape.config, shape.B, shape.T)));
      out.update({ rows });
    }
    for (const size of plan.squareMatmul) {
      if (performance.now() > deadline) {
        skipped.push(`square ${size}`);
        continue;
      }
      rows.push(...withTflops(await benchSquareMatmul(ctx, size)));
      out.update({ rows });
      // each tile config the engine's per-adapter search may choose, at the same size (GPUs only:
      // a software adapter compiles each for a minute)
      for (const config of ctx.software ? [] : CANDIDATES) {
        const why = unsupported(gpu.device, config) ?? (performance.now() > deadline ? 'out of time' : null);
        if (why !== null) {
          candidatesLeft.push(`square ${size} ${configName(config)} (${why})`);
          continue;
        }
        rows.push(...withTflops(await benchSquareMatmul(ctx, size, config)));
        out.update({ rows });
      }
    }
    out.update({ rows, skipped, candidatesLeft });
    for (const r of rows) {
      const rate = r.tflops !== undefined ? `${r.tflops.toFixed(3)} TFLOP/s` : `${(r.gbps ?? 0).toFixed(1)} GB/s`;
      console.log(`kernels ${r.preset} ${r.kernel} ${r.shape}: ${r.ms.toFixed(3)} ms, ${rate}`);
    }
    return skipped.length === 0;
  } finally {
    gpu.destroy();
  }
}

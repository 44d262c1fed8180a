/**
 * Timing of GPU work for the benchmarks: timestamp queries around a compute pass when the
 * adapter has 'timestamp-query' (and reports sane values), else the wall clock around
 * onSubmittedWorkDone. Repeats a kernel inside one pass so submission overhead is amortised.
 */
import type { BoundKernel } from '../packages/gpu/src/kernel.ts';

const QUERY_RESOLVE = 0x200;
const COPY_SRC = 0x4;
const COPY_DST = 0x8;
const MAP_READ = 0x1;

export class DispatchTimer {
  private readonly timestamps: boolean;

  constructor(private readonly device: GPUDevice) {
    this.timestamps = device.features.has('timestamp-query');
  }

  get method(): string {
    return this.timestamps ? 'timestamp queries' : 'wall clock';
  }

  /** Seconds for `reps` dispatches of `kernel` in one compute pass. */
  async seconds(kernel: BoundKernel, reps: number): Promise<number> {
    const { device } = this;
    const encoder = device.createCommandEncoder({ label: 'Bench.encoder' });
    let querySet: GPUQuerySet | undefined;
    let resolve: GPUBuffer | undefined;
    let readback: GPUBuffer | undefined;
    if (this.timestamps) {
      querySet = device.createQuerySet({ label: 'Bench.querySet', type: 'timestamp', count: 2 });
      resolve = device.createBuffer({ label: 'Bench.resolve', size: 16, usage: QUERY_RESOLVE | COPY_SRC });
      readback = device.createBuffer({ label: 'Bench.readback', size: 16, usage: MAP_READ | COPY_DST });
    }
    const pass = encoder.beginComputePass({
      label: 'Bench.pass',
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
    await readback.mapAsync(MAP_READ);
    const [begin, end] = new BigInt64Array(readback.getMappedRange().slice(0));
    readback.destroy();
    resolve?.destroy();
    querySet?.destroy();
    const seconds = Number((end as bigint) - (begin as bigint)) / 1e9;
    // Some drivers report zero or garbage timestamps; fall back to the wall clock then.
    return seconds > 0 && seconds < wall * 2 ? seconds : wall;
  }

  /**
   * Seconds per dispatch: one dispatch (first use of the pipeline and buffers), an untimed pass of
   * about `warmup` seconds (a GPU that idled while the host built buffers runs at low clocks for
   * a while: one dispatch does not bring them up, so the first kernel of a table would read slow), then
   * about `budget` seconds of repeats (2…200).
   */
  async perDispatch(kernel: BoundKernel, budget = 0.5, warmup = budget / 4): Promise<number> {
    const once = await this.seconds(kernel, 1);
    const repsFor = (seconds: number) => Math.max(2, Math.min(200, Math.ceil(seconds / Math.max(once, 1e-6))));
    if (warmup > 0) await this.seconds(kernel, repsFor(warmup));
    const reps = repsFor(budget);
    return (await this.seconds(kernel, reps)) / reps;
  }

  /** Units (FLOPs, bytes) per second ÷ 1e9 for a kernel doing `units` per dispatch. */
  async rate(kernel: BoundKernel, units: number, budget = 0.5, warmup = budget / 4): Promise<number> {
    return units / (await this.perDispatch(kernel, budget, warmup)) / 1e9;
  }
}

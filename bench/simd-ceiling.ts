/**
 * The WebAssembly SIMD ceiling of this core: f32x4 fused multiply-adds (relaxed SIMD) with no
 * memory traffic, the most any matmul kernel here can reach. Ten independent accumulators (enough
 * to cover the FMA latency) each take `acc = acc·x + y` per iteration; the rate is 8 flops per
 * f32x4 multiply-add. bench/cpu-step.ts prints each matmul shape's GFLOP/s against it. Null where
 * relaxed SIMD is missing (the kernels then multiply and add separately).
 */
import { assembleModule, FunctionBuilder, op, relaxedSimd } from '../packages/gpu/src/simd/wasm.cpu.ts';

const ACCUMULATORS = 10;

function ceilingKernel(): FunctionBuilder {
  const f = new FunctionBuilder('fused', [['iterations', 'i32']]);
  const { iterations } = f.params;
  const i = f.local('i32');
  const acc = Array.from({ length: ACCUMULATORS }, () => f.local('v128'));
  const [x, y] = [f.local('v128'), f.local('v128')];
  f.emit(op.f32x4Const(0.999), op.localSet(x), op.f32x4Const(1e-3), op.localSet(y));
  for (const a of acc) f.emit(op.f32x4Const(1), op.localSet(a));
  f.forLoop(i, op.i32Const(0), op.localGet(iterations), 1, () => {
    for (const a of acc) f.emit(op.localGet(a), op.localGet(x), op.localGet(y), op.f32x4RelaxedMadd, op.localSet(a));
  });
  // Keep the results alive: store their sum at byte 0.
  f.emit(op.i32Const(0), op.localGet(acc[0] as number));
  for (const a of acc.slice(1)) f.emit(op.localGet(a), op.f32x4Add);
  f.emit(op.v128Store());
  return f;
}

/** GFLOP/s of fused f32x4 multiply-adds on this thread, best of `repeats` runs of ~50 ms; null without relaxed SIMD. */
export function measureSimdCeiling(repeats = 5): number | null {
  if (!relaxedSimd()) return null;
  const module = new WebAssembly.Module(assembleModule([ceilingKernel()]));
  const memory = new WebAssembly.Memory({ initial: 1 });
  const { fused } = new WebAssembly.Instance(module, { env: { memory } }).exports as { fused: (n: number) => void };
  const iterations = 2_000_000;
  fused(10_000); // compile and warm
  let best = 0;
  for (let r = 0; r < repeats; r++) {
    const start = performance.now();
    fused(iterations);
    best = Math.max(best, (iterations * ACCUMULATORS * 8) / (performance.now() - start) / 1e6);
  }
  return best;
}

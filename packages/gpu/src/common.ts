// Everything in @shoal/gpu that is the same in a browser and in Node, with the float32 WebAssembly
// SIMD engine the CPU training backend runs on (SimdMatmul, SimdOptimizer, their threads and the
// memory the SIMD kernels share).
export { SimdOptimizer } from './adamw/adamw.simd.cpu.ts';
export * from './buffers.ts';
export * from './compare.ts';
export * from './cpu.ts';
export * from './kernel.ts';
export * from './kernels.ts';
export { SimdMatmul, type SimdMatmulOptions } from './matmul/matmul.simd.cpu.ts';
export * from './random.ts';
export * from './reduce/sum.ts';
export { formatAdapter } from './report.ts';
export * from './selftest.ts';
export * from './shader.ts';
export { WasmArena, type WasmArenaOptions } from './simd/arena.cpu.ts';
export { type KernelCall, KernelThreads, splitRange } from './simd/threads.cpu.ts';
export type { ModuleFamily } from './simd/wasm.cpu.ts';
export * from './types.ts';

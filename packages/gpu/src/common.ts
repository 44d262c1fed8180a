// Everything in @shoal/gpu that is the same in a browser and in Node.
export * from './buffers.ts';
export * from './compare.ts';
export * from './cpu.ts';
export * from './kernel.ts';
export * from './kernels.ts';
export * from './random.ts';
export * from './reduce/sum.ts';
export { formatAdapter } from './report.ts';
export * from './selftest.ts';
export * from './shader.ts';
export * from './types.ts';

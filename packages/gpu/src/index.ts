// Node entry: Dawn (the `webgpu` package) on Vulkan, with software fallbacks; relaxed SIMD on.
import './simd/relaxed.node.ts';
import './simd/spawn.node.ts';

export * from './common.ts';
export { acquireGpu } from './device.node.ts';
export { defaultTileCachePath, fileTileCache } from './matmul/tune.node.ts';

// Node entry: Dawn (the `webgpu` package) on Vulkan, with software fallbacks.
export * from './common.ts';
export { acquireGpu } from './device.node.ts';

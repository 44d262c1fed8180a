// Node entry: Dawn (the `webgpu` package) on Vulkan, with software fallbacks.
export * from './common.ts';
export { acquireGpu, INSTALL_HINT } from './device.node.ts';

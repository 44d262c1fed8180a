// Browser entry (main thread and workers): navigator.gpu.
import './simd/spawn.browser.ts';

export * from './common.ts';
export { acquireGpu } from './device.browser.ts';

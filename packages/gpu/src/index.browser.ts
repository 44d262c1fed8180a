// Browser entry (main thread and workers): navigator.gpu.
export * from './common.ts';
export { acquireGpu } from './device.browser.ts';

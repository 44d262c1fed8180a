// Browser entry (main thread and workers): navigator.gpu.
export * from './common.ts';
export { acquireGpu, INSTALL_HINT } from './device.browser.ts';

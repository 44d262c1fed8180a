// Packed datasets, shared by Node and the browser.
export * from './assign.ts';
export * from './cache.browser.ts';
export * from './cache.ts';
export * from './dataset.ts';
export * from './manifest.ts';
export * from './sharded-sampler.ts';
export * from './source.ts';
export * from './validation.ts';

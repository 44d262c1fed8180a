// Packed datasets in Node: the shared modules plus folders on disk.
export * from './cache.node.ts';
export * from './index.ts';
export * from './source.node.ts';

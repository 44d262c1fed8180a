// Node entry: adds what reads and writes files with node:fs (corpus loaders, dataset folders,
// shard caches on disk, the packer).
export * from './common.ts';
export * from './corpus.node.ts';
export * from './dataset/index.node.ts';
export * from './dataset/pack.node.ts';

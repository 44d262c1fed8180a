// Node entry: adds the corpus loaders that read files with node:fs.
export * from './common.ts';
export * from './corpus.node.ts';
export * from './dataset/pack.node.ts';

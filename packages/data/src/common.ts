// Everything in @shoal/data that is the same in a browser and in Node.
export * from './bits.ts';
export * from './corpus.ts';
export * from './dataset/index.ts';
export * from './entropy.ts';
export { fnv1a32 } from './hash.ts';
export * from './sampler.ts';
export * from './tokenizer.ts';

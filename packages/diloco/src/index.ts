/**
 * @shoal/diloco: Streaming DiLoCo's pure algorithm. No I/O, no GPU, no Node-only APIs: the same
 * code runs in a browser Web Worker, in Node and in the in-process simulator.
 */
export * from './aggregate.ts';
export * from './codecs/index.ts';
export * from './fragments.ts';
export * from './hash.ts';
export * from './lowrank/index.ts';
export * from './outer.ts';
export * from './round-passes.ts';
export * from './settings.ts';
export * from './vector-pool.ts';

// Browser entry (main thread and workers): no node:fs; the corpus comes from fetchCorpus().
export * from './common.ts';

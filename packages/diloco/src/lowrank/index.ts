/** The low-rank codec (docs/lowrank.md): its numerical core, and a fragment's projection for a round. */
export * from './fragment.ts';
export * from './orthonormal.ts';
export * from './project.ts';

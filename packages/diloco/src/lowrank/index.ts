/** The low-rank codec's numerical core (docs/lowrank.md); not yet wired into rounds or the wire. */
export * from './orthonormal.ts';
export * from './project.ts';
export * from './rank.ts';

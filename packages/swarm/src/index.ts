/**
 * @shoal/swarm: the coordinator and the worker as state machines over an injected Transport and
 * engine, and the in-process simulator they run in for tests and `shoal simulate`.
 */
export * from './attacks/index.ts';
export * from './config.ts';
export * from './coordinator.ts';
export * from './corpus-share.ts';
export * from './data-feed.ts';
export * from './data-ledger.ts';
export * from './dataset-share.ts';
export * from './host.ts';
export * from './member.ts';
export * from './owner.ts';
export * from './pipeline/groups.ts';
export * from './pipeline/mesh-stage.ts';
export * from './replica.ts';
export * from './replica-node.ts';
export * from './room-checkpoint.ts';
export * from './room-view.ts';
export type { MemberInfo } from './roster.ts';
export * from './round-bytes.ts';
export * from './run-id.ts';
export * from './sim/index.ts';
export * from './simulate.ts';
export * from './worker.ts';

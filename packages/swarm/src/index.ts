/**
 * @shoal/swarm: the protocol's state machines over an injected Transport and engine: the
 * coordinator (roster, schedule, referee, commit) and pipeline placement, the worker, the
 * replica and its rounds, the shard owners' duties and the data a room shares.
 */
export * from './config.ts';
export * from './coordinator.ts';
export * from './corpus-share.ts';
export * from './data-feed.ts';
export * from './data-ledger.ts';
export * from './dataset-share.ts';
export * from './host.ts';
export * from './inner-steps.ts';
export * from './member.ts';
export * from './owner.ts';
export * from './pipeline/groups.ts';
export * from './pipeline/mesh-stage.ts';
export * from './replica.ts';
export * from './replica-node.ts';
export type { MemberSteps } from './room-progress.ts';
export { type MemberInfo, median, stepsPerSecondNow } from './roster.ts';
export * from './round-codec.ts';
export * from './round-memo.ts';
export { stepTimes } from './round-plan.ts';
export * from './run-id.ts';
export * from './worker.ts';

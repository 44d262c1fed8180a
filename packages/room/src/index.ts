/**
 * @shoal/room: what the apps share about a room: its run options and the RunConfig they make, the
 * plan, the room view, the room checkpoint, and the host and volunteer services.
 */
export * from './kept-view.ts';
export * from './plan.ts';
export * from './room-checkpoint.ts';
export * from './room-figures.ts';
export * from './room-view.ts';
export * from './round-bytes.ts';
export * from './run-config.ts';
export * from './run-options.ts';

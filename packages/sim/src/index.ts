/**
 * @shoal/sim: the in-process simulator (a virtual clock and a simulated network of Transports on
 * it) and `shoal simulate`'s engine. The attack harness is `@shoal/sim/attacks`.
 */
export * from './clock.ts';
export * from './keys.ts';
export * from './links.ts';
export * from './network.ts';
export * from './pipeline.ts';
export * from './shared-cpu.ts';
export * from './sim-transport.ts';
export * from './simulate.ts';

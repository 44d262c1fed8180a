/**
 * @shoal/protocol: what members of a room say to each other and how it travels. The Transport
 * interface, the versioned message union with its schemas, the binary wire layout, chunking for
 * data channels, and the counters where rejected input ends up. No I/O: the same code runs in
 * browsers, Web Workers and Node.
 */
export * from './chunks.ts';
export * from './codec-ids.ts';
export * from './counters.ts';
export * from './header.ts';
export * from './identity.ts';
export * from './json-depth.ts';
export * from './limits.ts';
export * from './messages.ts';
export * from './reassembler.ts';
export * from './room-summary.ts';
export * from './room-view.ts';
export * from './round-open.ts';
export * from './schemas.ts';
export * from './transport.ts';
export * from './wire.ts';

/**
 * @shoal/signaling: the contract between a Shoal server and its clients at SIGNAL_PATH — the
 * WebSocket messages as zod schemas (messages.ts) and SignalClient (client.ts), which browsers
 * and Node share. The server itself is apps/server.
 */
export * from './client.ts';
export * from './messages.ts';
export * from './reconnect.ts';

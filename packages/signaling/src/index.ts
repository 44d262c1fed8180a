export * from './client.ts';
export * from './messages.ts';

/** `shoal attacks`: hostile volunteers tried against the in-memory room. */
export * from './catalogue.ts';
export * from './oracle.ts';
export * from './room.ts';
export * from './runner.ts';
export * from './types.ts';

/** `shoal attacks`: hostile volunteers tried against the in-memory room (issue 13). */
export * from './catalogue.ts';
export * from './oracle.ts';
export * from './room.ts';
export * from './runner.ts';
export * from './types.ts';

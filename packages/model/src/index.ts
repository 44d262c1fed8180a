export * from './checkpoint.ts';
export * from './config.ts';
export * from './init.ts';
export * from './layout.ts';
export * from './safetensors.ts';

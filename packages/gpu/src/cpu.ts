// The kernels' CPU references in one place: the model's CPU backend is composed from these.
export * from './adamw/adamw.cpu.ts';
export * from './adamw/schedule.ts';
export * from './attention/attention.cpu.ts';
export * from './crossentropy/crossentropy.cpu.ts';
export * from './embedding/embedding.cpu.ts';
export * from './gelu/gelu.cpu.ts';
export * from './gradnorm/gradnorm.cpu.ts';
export * from './layernorm/layernorm.cpu.ts';
export * from './matmul/matmul.cpu.ts';
export * from './residual/residual.cpu.ts';
export * from './vector/vector.cpu.ts';

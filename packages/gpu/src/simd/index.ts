// The WebAssembly assembler and arena, for kernels outside this package (the round's passes).
export { WasmArena, type WasmArenaOptions } from './arena.cpu.ts';
export { compileOnce, FunctionBuilder, type Instr, type ModuleFamily, op, relaxedSimd } from './wasm.cpu.ts';

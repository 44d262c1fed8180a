/**
 * Turns on relaxed SIMD in Node versions whose V8 has it behind a flag (Node 20: V8 11.3; Node 22
 * ships it on), so the CPU backend's matmul can use f32x4.relaxed_madd (fused multiply-add:
 * 1.2–1.4× its multiply-then-add kernel here). Imported for its effect by the Node entry, before
 * any kernel module is compiled; a V8 without the flag ignores it, and `relaxedSimd()` then says
 * false and the kernels without it run.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--experimental-wasm-relaxed-simd');

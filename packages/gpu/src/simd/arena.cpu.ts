/**
 * The memory the CPU backend's WebAssembly SIMD kernels share (*.simd.cpu.ts): one
 * WebAssembly.Memory with a bump-allocated heap for operands that should not be copied (CpuGpt
 * keeps its activations there) and per-call scratch after it.
 *
 *   [0, 16)            constants: 1.0 at byte 0 (the dbias kernel's A), zeros after
 *   [16, heapEnd)      allocate(): views handed out, valid for the arena's life
 *   [heapEnd, …)       scratch: reset by each kernel call, addressed in bytes
 *
 * Sized once: growing a WebAssembly.Memory detaches every view into it, so an arena that has
 * handed out views refuses to grow (reserve scratch for the largest call up front); one that has
 * not (a kernel engine used on ordinary arrays, which copies them in) grows as calls need.
 */

import type { ModuleFamily } from './wasm.cpu.ts';

const PAGE = 65536;
const HEAP_START = 16;
const align16 = (bytes: number): number => (bytes + 15) & ~15;

export interface WasmArenaOptions {
  /** Floats to reserve for `allocate`. */
  floats?: number;
  /** Floats of per-call scratch to reserve. */
  scratchFloats?: number;
  /**
   * A shared memory, that worker threads can run kernels on (simd/threads.cpu.ts). It cannot
   * grow: reserve every float it will need. Needs cross-origin isolation in browsers.
   */
  shared?: boolean;
}

export class WasmArena {
  /** A view of the whole memory; replaced when the memory grows. */
  f32: Float32Array;
  private heapTop = HEAP_START;
  private readonly heapEnd: number;
  private scratchTop: number;
  private readonly instances = new Map<WebAssembly.Module, WebAssembly.Exports>();

  private constructor(
    readonly memory: WebAssembly.Memory,
    heapFloats: number,
    /** Whether the memory is shared (see WasmArenaOptions.shared). */
    readonly shared: boolean,
  ) {
    this.heapEnd = HEAP_START + align16(4 * heapFloats);
    this.scratchTop = this.heapEnd;
    this.f32 = new Float32Array(memory.buffer);
    this.f32[0] = 1;
  }

  /** A new arena, or null where the memory cannot be had (wasm32 memories stop at 4 GiB, browsers often lower). */
  static create(options: WasmArenaOptions = {}): WasmArena | null {
    const { floats = 0, scratchFloats = 0, shared = false } = options;
    const bytes = HEAP_START + align16(4 * floats) + align16(4 * scratchFloats);
    const pages = Math.max(1, Math.ceil(bytes / PAGE));
    try {
      const memory = new WebAssembly.Memory(shared ? { initial: pages, maximum: pages, shared } : { initial: pages });
      return new WasmArena(memory, floats, shared);
    } catch {
      return null;
    }
  }

  /** The exports of `family`'s module for this memory's kind, instantiated on it once per arena. */
  exportsOf<T>(family: ModuleFamily): T {
    const module = family(this.shared);
    if (!module)
      throw new Error(`WasmArena: a kernel module does not compile here${this.shared ? ' for a shared memory' : ''}`);
    let exports = this.instances.get(module);
    if (!exports) {
      exports = new WebAssembly.Instance(module, { env: { memory: this.memory } }).exports;
      this.instances.set(module, exports);
    }
    return exports as T;
  }

  /** `n` zeroed floats in this memory, for operands kernels should use in place. */
  allocate(n: number): Float32Array {
    const start = this.heapTop;
    if (start + 4 * n > this.heapEnd) {
      throw new RangeError(`WasmArena: allocating ${n} floats exceeds the ${(this.heapEnd - HEAP_START) / 4} reserved`);
    }
    this.heapTop = start + align16(4 * n);
    return new Float32Array(this.memory.buffer, start, n);
  }

  /** Whether `x` is a view into this memory. */
  owns(x: Float32Array): boolean {
    return x.buffer === this.memory.buffer;
  }

  /** Starts a kernel call: its scratch begins at the end of the heap again. */
  resetScratch(): void {
    this.scratchTop = this.heapEnd;
  }

  /** Byte address of `floats` floats of scratch for this call (contents undefined). */
  scratch(floats: number): number {
    const at = this.scratchTop;
    this.scratchTop = at + align16(4 * floats);
    if (this.scratchTop > this.memory.buffer.byteLength) {
      if (this.heapTop > HEAP_START || this.shared) {
        throw new RangeError(
          `WasmArena: a kernel needs ${(this.scratchTop - this.heapEnd) / 4} floats of scratch; reserve them at create ` +
            '(growing the memory would detach the allocated views)',
        );
      }
      this.memory.grow(Math.ceil((this.scratchTop - this.memory.buffer.byteLength) / PAGE));
      this.f32 = new Float32Array(this.memory.buffer);
    }
    return at;
  }

  /** Byte address of `floats` zeroed floats of scratch. */
  zeros(floats: number): number {
    const at = this.scratch(floats);
    this.f32.fill(0, at >> 2, (at >> 2) + floats);
    return at;
  }

  /**
   * Byte address of x as [rows, cols] with rows `ld` floats apart: x itself when it lives here
   * with ld = cols, else a copy in scratch (each row zero-padded to ld).
   */
  place(x: Float32Array, rows: number, cols: number, ld = cols): number {
    if (ld === cols && this.owns(x)) return x.byteOffset;
    const at = this.scratch(rows * ld);
    const f32 = this.f32;
    const base = at >> 2;
    if (ld === cols) {
      f32.set(x.length === rows * cols ? x : x.subarray(0, rows * cols), base);
      return at;
    }
    for (let r = 0; r < rows; r++) {
      for (let i = 0; i < cols; i++) f32[base + r * ld + i] = x[r * cols + i] as number;
      for (let i = cols; i < ld; i++) f32[base + r * ld + i] = 0;
    }
    return at;
  }

  /** Byte address for an output of `floats` floats: x itself when it lives here, else scratch (see copyOut). */
  output(x: Float32Array, floats: number): number {
    return this.owns(x) ? x.byteOffset : this.scratch(floats);
  }

  /** Copies [rows, cols] at byte address `at` (rows `ld` floats apart) into x, unless x is that memory. */
  copyOut(x: Float32Array, at: number, rows: number, cols: number, ld = cols): void {
    if (this.owns(x) && x.byteOffset === at && ld === cols) return;
    const f32 = this.f32;
    const base = at >> 2;
    for (let r = 0; r < rows; r++) for (let i = 0; i < cols; i++) x[r * cols + i] = f32[base + r * ld + i] as number;
  }
}

/**
 * Float32Arrays of a round's sizes, handed back and taken again: a fresh array of a fragment's
 * size costs its page faults on first write (≈ 20 ms for `small`'s 22 MB on the development
 * machine, six times the copy itself), and a round makes several. A buffer given back must not be
 * read or written by its giver again; one taken holds whatever it held (write before reading).
 */
export class VectorPool {
  private readonly free = new Map<number, Float32Array[]>();

  /** `keep`: buffers kept per length; more are left to the garbage collector. */
  constructor(private readonly keep = 8) {}

  /** A buffer of `length` values, contents undefined. */
  take(length: number): Float32Array {
    return this.free.get(length)?.pop() ?? new Float32Array(length);
  }

  /** Hands `values` back: its giver holds no reference from now on. */
  give(values: Float32Array): void {
    if (values.length === 0 || values.byteOffset !== 0 || values.byteLength !== values.buffer.byteLength) return;
    const list = this.free.get(values.length) ?? [];
    if (list.length >= this.keep || list.includes(values)) return;
    list.push(values);
    this.free.set(values.length, list);
  }
}

/** The process's pool (one JS thread: no two owners at once). */
export const vectorPool = new VectorPool();

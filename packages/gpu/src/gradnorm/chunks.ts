/**
 * Element ranges of large flat buffers as storage bindings. A binding's byte offset must be a
 * multiple of minStorageBufferOffsetAlignment (256 bytes) and its size at most
 * maxStorageBufferBindingSize (128 MiB on lavapipe and in many browsers), while a parameter range
 * starts at any element and may be longer (60M floats are 240 MB). So a range becomes chunks: each
 * an aligned view, plus the element at which the range starts inside that view.
 */
import type { TensorView } from '../kernel.ts';

export interface Chunk {
  /** Aligned binding that covers the chunk. */
  view: TensorView;
  /** Element index inside `view` where the chunk starts (< 64 for a 256-byte alignment). */
  start: number;
  /** Elements in the chunk. */
  n: number;
  /** Element offset of the chunk from the start of the range. */
  rangeOffset: number;
}

/** Splits elements [offset, offset + n) of `buffer` (f32) into bindable chunks, in order. */
export function chunkRange(
  limits: Pick<GPUSupportedLimits, 'minStorageBufferOffsetAlignment' | 'maxStorageBufferBindingSize'>,
  buffer: GPUBuffer,
  offset: number,
  n: number,
  label = buffer.label,
): Chunk[] {
  if (!Number.isInteger(offset) || !Number.isInteger(n) || offset < 0 || n < 0) {
    throw new RangeError(`${label}: range [${offset}, ${offset}+${n}) must be whole, non-negative elements`);
  }
  if ((offset + n) * 4 > buffer.size) {
    throw new RangeError(`${label}: range [${offset}, ${offset + n}) runs past the buffer (${buffer.size / 4} floats)`);
  }
  const align = limits.minStorageBufferOffsetAlignment;
  // Room for the misaligned head, and a whole number of 64-float blocks per chunk.
  const maxElements = Math.floor((limits.maxStorageBufferBindingSize - align) / 4 / 64) * 64;
  const chunks: Chunk[] = [];
  for (let done = 0; done < n; ) {
    const count = Math.min(n - done, maxElements);
    const firstByte = (offset + done) * 4;
    const viewOffset = Math.floor(firstByte / align) * align;
    const start = (firstByte - viewOffset) / 4;
    chunks.push({
      view: { buffer, offset: viewOffset, size: (start + count) * 4 },
      start,
      n: count,
      rangeOffset: done,
    });
    done += count;
  }
  return chunks;
}

/**
 * Activations and gradients as bytes on a pipe message: float32 little-endian, or bfloat16 (the
 * top half of a float32, rounded to nearest even: half the bytes, 8 bits of mantissa).
 */

/** The float's bytes, `dtype` wide, into `out` at `offset`; returns the next offset. */
export function writeValues(values: Float32Array, dtype: 'f32' | 'bf16', out: Uint8Array, offset: number): number {
  if (dtype === 'f32') {
    out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), offset);
    return offset + values.byteLength;
  }
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i] as number;
    // NaN stays NaN (a quiet one); the rest round to nearest even on the dropped 16 bits
    const nan = (x & 0x7f80_0000) === 0x7f80_0000 && (x & 0x007f_ffff) !== 0;
    const rounded = nan ? (x >>> 16) | 0x0040 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
    view.setUint16(offset + 2 * i, rounded & 0xffff, true);
  }
  return offset + 2 * values.length;
}

/** `count` floats of `dtype` from `bytes` at `offset`, as a new Float32Array. */
export function readValues(bytes: Uint8Array, offset: number, count: number, dtype: 'f32' | 'bf16'): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * (dtype === 'f32' ? 4 : 2));
  if (dtype === 'f32') {
    for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) bits[i] = view.getUint16(2 * i, true) << 16;
  return out;
}

/** Bytes per value. */
export const bytesPerValue = (dtype: 'f32' | 'bf16') => (dtype === 'f32' ? 4 : 2);

/**
 * The index of the first of `count` floats of `dtype` in `bytes` at `offset` that is NaN or ±∞
 * (its exponent bits all set), or −1: checked on the bytes, before anything is decoded or kept.
 */
export function firstNonFinite(bytes: Uint8Array, offset: number, count: number, dtype: 'f32' | 'bf16'): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * bytesPerValue(dtype));
  if (dtype === 'f32') {
    for (let i = 0; i < count; i++) if ((view.getUint32(4 * i, true) & 0x7f80_0000) === 0x7f80_0000) return i;
    return -1;
  }
  for (let i = 0; i < count; i++) if ((view.getUint16(2 * i, true) & 0x7f80) === 0x7f80) return i;
  return -1;
}

/**
 * safetensors, F32 only: 8-byte little-endian header length, a JSON header
 * `{name: {dtype, shape, data_offsets: [begin, end]}, __metadata__: {key: string}}`, then the
 * tensor bytes. The reader trusts nothing: every length, offset, dtype and shape is checked, and
 * each problem gets a one-line error naming it.
 */

export interface TensorEntry {
  shape: number[];
  data: Float32Array;
}

export interface SafetensorsFile {
  tensors: Map<string, TensorEntry>;
  metadata: Record<string, string>;
}

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

/** nanoGPT stores causal-mask buffers (`…attn.bias`, not parameters) whose dtype may not be F32. */
export type SkipTensor = (name: string) => boolean;

const MAX_HEADER_BYTES = 100 * 2 ** 20;

export function writeSafetensors(
  tensors: { name: string; shape: number[]; data: Float32Array }[],
  metadata: Record<string, string> = {},
): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const { name, shape, data } of tensors) {
    const count = shape.reduce((a, b) => a * b, 1);
    if (count !== data.length)
      throw new CheckpointError(`${name}: shape [${shape}] holds ${count} values, data has ${data.length}`);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.byteLength] };
    offset += data.byteLength;
  }
  // Pad the JSON with spaces so the data starts 8-byte aligned, as the reference writer does.
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let position = 8 + headerBytes.length;
  for (const { data } of tensors) {
    out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), position);
    position += data.byteLength;
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function readSafetensors(bytes: Uint8Array, skip: SkipTensor = () => false): SafetensorsFile {
  if (bytes.length < 8) throw new CheckpointError(`file is ${bytes.length} bytes: too short for a safetensors header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getBigUint64(0, true);
  if (headerLength > BigInt(Math.min(MAX_HEADER_BYTES, bytes.length - 8))) {
    throw new CheckpointError(
      `header length ${headerLength} exceeds the file (${bytes.length} bytes): truncated or not safetensors`,
    );
  }
  const dataStart = 8 + Number(headerLength);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, dataStart)));
  } catch (error) {
    throw new CheckpointError(`header is not valid JSON: ${(error as Error).message}`);
  }
  if (!isObject(header)) throw new CheckpointError('header is not a JSON object');

  const dataLength = bytes.length - dataStart;
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, TensorEntry>();
  const ranges: [number, number, string][] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (!isObject(entry)) throw new CheckpointError('__metadata__ is not an object');
      for (const [key, value] of Object.entries(entry)) {
        if (typeof value !== 'string') throw new CheckpointError(`__metadata__.${key} is not a string`);
        metadata[key] = value;
      }
      continue;
    }
    if (!isObject(entry)) throw new CheckpointError(`${name}: header entry is not an object`);
    const { dtype, shape, data_offsets: offsets } = entry;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw new CheckpointError(`${name}: shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
    }
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isInteger(o) && o >= 0)) {
      throw new CheckpointError(`${name}: data_offsets ${JSON.stringify(offsets)} is not [begin, end]`);
    }
    const [begin, end] = offsets as [number, number];
    if (begin > end || end > dataLength) {
      throw new CheckpointError(`${name}: data_offsets [${begin}, ${end}] lie outside the ${dataLength} data bytes`);
    }
    ranges.push([begin, end, name]);
    if (skip(name)) continue;
    if (dtype !== 'F32') throw new CheckpointError(`${name}: dtype ${String(dtype)}, expected F32`);
    const count = (shape as number[]).reduce((a, b) => a * b, 1);
    if (end - begin !== count * 4) {
      throw new CheckpointError(`${name}: shape [${shape}] needs ${count * 4} bytes, data_offsets give ${end - begin}`);
    }
    // Copy: the source may be unaligned for a Float32Array view, and the caller may keep it.
    const data = new Float32Array(count);
    new Uint8Array(data.buffer).set(bytes.subarray(dataStart + begin, dataStart + end));
    tensors.set(name, { shape: shape as number[], data });
  }
  ranges.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < ranges.length; i++) {
    const [prev, cur] = [ranges[i - 1], ranges[i]] as [[number, number, string], [number, number, string]];
    if (cur[0] < prev[1]) throw new CheckpointError(`${cur[2]}: data overlaps ${prev[2]}`);
  }
  return { tensors, metadata };
}

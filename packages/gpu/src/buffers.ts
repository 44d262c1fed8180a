/** Small helpers for storage buffers and reading results back. Every buffer gets a label. */

export const STORAGE = 0x80 | 0x4 | 0x8; // GPUBufferUsage.STORAGE | COPY_SRC | COPY_DST (constants, so this file needs no globals)
const MAP_READ = 0x1;
const COPY_DST = 0x8;
const UNIFORM = 0x40;

/** A storage buffer holding `data` (f32, u32 or i32), padded to a multiple of 4 bytes. */
export function createStorageBuffer(
  device: GPUDevice,
  label: string,
  data: Float32Array | Uint32Array | Int32Array,
): GPUBuffer {
  const buffer = device.createBuffer({
    label,
    size: Math.max(4, data.byteLength),
    usage: STORAGE,
    mappedAtCreation: true,
  });
  new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  buffer.unmap();
  return buffer;
}

export function createEmptyStorageBuffer(device: GPUDevice, label: string, byteLength: number): GPUBuffer {
  return device.createBuffer({ label, size: Math.max(4, Math.ceil(byteLength / 4) * 4), usage: STORAGE });
}

/** A uniform buffer of u32 words (WGSL structs of u32/f32 fields; pass f32 through `f32Bits`). */
export function createUniformBuffer(device: GPUDevice, label: string, words: number[]): GPUBuffer {
  // Uniform buffers bind in 16-byte units.
  const size = Math.max(16, Math.ceil((words.length * 4) / 16) * 16);
  const buffer = device.createBuffer({ label, size, usage: UNIFORM | COPY_DST, mappedAtCreation: true });
  new Uint32Array(buffer.getMappedRange()).set(words);
  buffer.unmap();
  return buffer;
}

export function f32Bits(value: number): number {
  return new Uint32Array(new Float32Array([value]).buffer)[0] as number;
}

/** Copies `count` f32 values from `buffer` (at byte `offset`) to the CPU. */
export async function readFloat32(
  device: GPUDevice,
  buffer: GPUBuffer,
  count: number,
  offset = 0,
): Promise<Float32Array> {
  const byteLength = count * 4;
  const staging = device.createBuffer({
    label: `${buffer.label}.readback`,
    size: Math.max(4, byteLength),
    usage: MAP_READ | COPY_DST,
  });
  const encoder = device.createCommandEncoder({ label: `${buffer.label}.readback` });
  encoder.copyBufferToBuffer(buffer, offset, staging, 0, byteLength);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const result = new Float32Array(staging.getMappedRange().slice(0));
  staging.unmap();
  staging.destroy();
  return result;
}

/**
 * For the kernel tests: named tensors packed into ONE buffer, as the model packs parameters,
 * each at a non-zero offset aligned to minStorageBufferOffsetAlignment (256 bytes), with a guard
 * gap after each one. The gaps hold a sentinel pattern; `guardsIntact` reads the whole buffer back
 * and says whether any kernel wrote outside its views.
 */
import { readFloat32, STORAGE } from '../buffers.ts';
import type { TensorView } from '../kernel.ts';

const SENTINEL = 0x7fc0_dead; // a quiet NaN no kernel computes
const GUARD_BYTES = 256;

interface Slot {
  offset: number;
  byteLength: number;
}

export class TestArena {
  private constructor(
    private readonly device: GPUDevice,
    readonly buffer: GPUBuffer,
    private readonly slots: Map<string, Slot>,
  ) {}

  /** Packs `tensors` (data, or a length for zeros) at 256-byte-aligned offsets starting after one guard gap. */
  static create(device: GPUDevice, label: string, tensors: Record<string, Float32Array | Int32Array | number>) {
    const align = Math.max(256, device.limits.minStorageBufferOffsetAlignment);
    const slots = new Map<string, Slot>();
    let offset = align; // never 0: the kernels must honour view offsets
    for (const [name, tensor] of Object.entries(tensors)) {
      const byteLength = 4 * Math.max(1, typeof tensor === 'number' ? tensor : tensor.length);
      slots.set(name, { offset, byteLength });
      offset = Math.ceil((offset + byteLength + GUARD_BYTES) / align) * align;
    }
    const buffer = device.createBuffer({
      label: `${label}.arena`,
      size: offset,
      usage: STORAGE,
      mappedAtCreation: true,
    });
    const words = new Uint32Array(buffer.getMappedRange());
    words.fill(SENTINEL);
    for (const [name, tensor] of Object.entries(tensors)) {
      const slot = slots.get(name) as Slot;
      if (typeof tensor === 'number') words.fill(0, slot.offset / 4, (slot.offset + slot.byteLength) / 4);
      else words.set(new Uint32Array(tensor.buffer, tensor.byteOffset, tensor.length), slot.offset / 4);
    }
    buffer.unmap();
    return new TestArena(device, buffer, slots);
  }

  view(name: string): TensorView {
    const slot = this.slot(name);
    return { buffer: this.buffer, offset: slot.offset, size: slot.byteLength };
  }

  /** Overwrites a tensor's contents (the same length). */
  write(name: string, data: Float32Array): void {
    this.device.queue.writeBuffer(this.buffer, this.slot(name).offset, data.buffer, data.byteOffset, data.byteLength);
  }

  async read(name: string): Promise<Float32Array> {
    const slot = this.slot(name);
    return readFloat32(this.device, this.buffer, slot.byteLength / 4, slot.offset);
  }

  /** True when every byte outside the tensors still holds the sentinel. */
  async guardsIntact(): Promise<boolean> {
    const words = new Uint32Array((await this.readAll()).buffer);
    const sorted = [...this.slots.values()].sort((a, b) => a.offset - b.offset);
    let from = 0;
    for (const slot of [...sorted, { offset: words.length * 4, byteLength: 0 }]) {
      for (let i = from / 4; i < slot.offset / 4; i++) if (words[i] !== SENTINEL) return false;
      from = slot.offset + slot.byteLength;
    }
    return true;
  }

  destroy(): void {
    this.buffer.destroy();
  }

  private slot(name: string): Slot {
    const slot = this.slots.get(name);
    if (!slot) throw new Error(`TestArena: no tensor "${name}"`);
    return slot;
  }

  private async readAll(): Promise<Float32Array> {
    const staging = this.device.createBuffer({
      label: `${this.buffer.label}.readback`,
      size: this.buffer.size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const encoder = this.device.createCommandEncoder({ label: `${this.buffer.label}.readback` });
    encoder.copyBufferToBuffer(this.buffer, 0, staging, 0, this.buffer.size);
    this.device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const result = new Float32Array(staging.getMappedRange().slice(0));
    staging.unmap();
    staging.destroy();
    return result;
  }
}

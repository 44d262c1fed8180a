/**
 * Places many f32 tensors in a few large storage buffers (the activations and their gradients),
 * each tensor a view aligned for binding. A tensor never straddles two buffers, every buffer stays
 * within the device's maxBufferSize, and every view within maxStorageBufferBindingSize, so a
 * preset that is too large for the adapter fails here with the tensor's name, not in a dispatch.
 */
import { STORAGE, type TensorView } from '@shoal/gpu';

export interface ArenaLimits {
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  minStorageBufferOffsetAlignment: number;
}

/** Largest buffer an arena asks for: browsers refuse or thrash on single allocations much past this. */
const MAX_ARENA_BUFFER_BYTES = 1 << 30;

export class TensorArena {
  private constructor(
    readonly buffers: GPUBuffer[],
    private readonly views: Map<string, TensorView>,
    /** Bytes across the buffers, alignment included. */
    readonly bytes: number,
  ) {}

  /** One view per `[name, floats]`, in order, packed into as few buffers as the limits allow. */
  static create(device: GPUDevice, label: string, tensors: ReadonlyArray<readonly [string, number]>): TensorArena {
    const limits: ArenaLimits = device.limits;
    const align = limits.minStorageBufferOffsetAlignment;
    const capacity = Math.min(limits.maxBufferSize, MAX_ARENA_BUFFER_BYTES);
    const placed: { name: string; slab: number; offset: number; size: number }[] = [];
    const slabBytes: number[] = [0];
    for (const [name, floats] of tensors) {
      if (!Number.isInteger(floats) || floats < 1) throw new RangeError(`${label}.${name}: ${floats} floats`);
      const size = floats * 4;
      if (size > limits.maxStorageBufferBindingSize || size > capacity) {
        throw new RangeError(
          `${label}.${name} needs ${formatBytes(size)} in one binding; this adapter allows ` +
            `${formatBytes(Math.min(limits.maxStorageBufferBindingSize, capacity))} (use a smaller batch or preset)`,
        );
      }
      let slab = slabBytes.length - 1;
      let offset = Math.ceil((slabBytes[slab] as number) / align) * align;
      if (offset + size > capacity) {
        slabBytes.push(0);
        slab++;
        offset = 0;
      }
      slabBytes[slab] = offset + size;
      placed.push({ name, slab, offset, size });
    }
    const buffers = slabBytes.map((bytes, i) =>
      device.createBuffer({ label: `${label}[${i}]`, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: STORAGE }),
    );
    const views = new Map<string, TensorView>();
    for (const { name, slab, offset, size } of placed) {
      if (views.has(name)) throw new Error(`${label}: two tensors named ${name}`);
      views.set(name, { buffer: buffers[slab] as GPUBuffer, offset, size });
    }
    const bytes = buffers.reduce((sum, buffer) => sum + buffer.size, 0);
    return new TensorArena(buffers, views, bytes);
  }

  view(name: string): TensorView {
    const view = this.views.get(name);
    if (!view) throw new Error(`no tensor ${name} in this arena`);
    return view;
  }

  destroy(): void {
    for (const buffer of this.buffers) buffer.destroy();
  }
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

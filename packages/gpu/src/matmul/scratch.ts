/**
 * One temporary buffer shared by every bound kernel of a family that needs scratch space (the
 * weight gradient's split-K partial results). WebGPU runs a device's dispatches in queue order,
 * and each bound kernel's reads of its partials finish before the next one writes them, so one
 * buffer serves all layers instead of one per bound kernel. It grows by replacement: a replaced
 * buffer lives on until the last bound kernel using it is destroyed.
 */
import { createEmptyStorageBuffer } from '../buffers.ts';

interface Slot {
  buffer: GPUBuffer;
  users: number;
  retired: boolean;
}

export interface ScratchLease {
  readonly buffer: GPUBuffer;
  /** Gives the buffer back; safe to call twice. */
  release(): void;
}

export class SharedScratch {
  private current: Slot | null = null;
  private readonly live = new Set<Slot>();

  constructor(
    private readonly device: GPUDevice,
    private readonly label: string,
    /** Growth doubles the size up to this many bytes, then grows only as far as asked. */
    private readonly growthLimit: number,
  ) {}

  /** A buffer of at least `bytes` bytes, shared with the other leases. */
  acquire(bytes: number): ScratchLease {
    let slot = this.current;
    if (!slot || slot.buffer.size < bytes) {
      const size = Math.max(bytes, Math.min(2 * (slot?.buffer.size ?? 0), this.growthLimit));
      if (slot) this.retire(slot);
      slot = { buffer: createEmptyStorageBuffer(this.device, this.label, size), users: 0, retired: false };
      this.current = slot;
      this.live.add(slot);
    }
    const held = slot;
    held.users++;
    let released = false;
    return {
      buffer: held.buffer,
      release: () => {
        if (released) return;
        released = true;
        held.users--;
        if (held.retired && held.users === 0) this.free(held);
      },
    };
  }

  /** Frees every buffer, leased or not. */
  destroy(): void {
    for (const slot of this.live) slot.buffer.destroy();
    this.live.clear();
    this.current = null;
  }

  private retire(slot: Slot) {
    slot.retired = true;
    if (slot.users === 0) this.free(slot);
  }

  private free(slot: Slot) {
    slot.buffer.destroy();
    this.live.delete(slot);
  }
}

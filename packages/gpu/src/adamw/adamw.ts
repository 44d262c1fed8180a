/**
 * AdamW on the GPU over ranges of flat parameter / gradient / moment buffers. Bind once
 * (`update`), then each step write the per-step scalars with `writeStep` (one queue.writeBuffer
 * of 32 bytes) and dispatch. The gradient is multiplied by a clip scale that the gradient-norm
 * kernel writes on the GPU, so a step needs no readback.
 */
import { createStorageBuffer, f32Bits } from '../buffers.ts';
import { chunkRange } from '../gradnorm/chunks.ts';
import { type BoundKernel, bindKernel, ceilDiv, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { ADAMW_DEFAULTS, adamwBiasCorrections } from './adamw.cpu.ts';
import source from './adamw.wgsl?raw';

const UNIFORM = 0x40;
const COPY_DST = 0x8;

/** Elements [offset, offset + n) of every flat buffer, decayed with `weightDecay` (λ). */
export interface AdamWRange {
  offset: number;
  n: number;
  weightDecay: number;
}

/** Flat f32 buffers with one layout: element i of each belongs to the same parameter. */
export interface AdamWBuffers {
  params: GPUBuffer;
  grads: GPUBuffer;
  m: GPUBuffer;
  v: GPUBuffer;
  /** Element `index` of `view` multiplies every gradient (GradNormKernels writes the clip scale there); omitted: 1. */
  gradScale?: { view: TensorView; index: number };
}

export interface AdamWStepScalars {
  lr: number;
  /** Step number, from 1 (bias corrections 1 − βᵗ). */
  t: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
}

/** The 8 words of the step uniform (Hyper in adamw.wgsl): lr, β1, β2, ε, 1 − β1ᵗ, 1 − β2ᵗ, padding. */
function adamwStepWords(scalars: AdamWStepScalars): Float32Array {
  const { lr, t, beta1 = ADAMW_DEFAULTS.beta1, beta2 = ADAMW_DEFAULTS.beta2, eps = ADAMW_DEFAULTS.eps } = scalars;
  const [bc1, bc2] = adamwBiasCorrections(beta1, beta2, t);
  return new Float32Array([lr, beta1, beta2, eps, bc1, bc2, 0, 0]);
}

/**
 * Sorts ranges, merges neighbours with the same λ (fewer dispatches: nanoGPT alternates decayed
 * matrices with undecayed biases, but adjacent matrices merge), drops empty ones and rejects overlaps.
 */
export function coalesceRanges(ranges: AdamWRange[]): AdamWRange[] {
  const sorted = ranges.filter((r) => r.n > 0).sort((a, b) => a.offset - b.offset);
  const merged: AdamWRange[] = [];
  for (const range of sorted) {
    const last = merged.at(-1);
    if (last && range.offset < last.offset + last.n) {
      throw new RangeError(`AdamW: ranges [${last.offset}, +${last.n}) and [${range.offset}, +${range.n}) overlap`);
    }
    if (last && range.offset === last.offset + last.n && range.weightDecay === last.weightDecay) last.n += range.n;
    else merged.push({ ...range });
  }
  return merged;
}

export class AdamWKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipeline: GPUComputePipeline,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, workgroupSize = 256): Promise<AdamWKernels> {
    if (workgroupSize > device.limits.maxComputeInvocationsPerWorkgroup) {
      throw new RangeError(`AdamWKernels: workgroup size ${workgroupSize} exceeds the device limit`);
    }
    const pipeline = await createComputePipeline(device, 'AdamW.pipeline', source, { WORKGROUP_SIZE: workgroupSize });
    return new AdamWKernels(device, pipeline, workgroupSize);
  }

  /** The per-step uniform (32 bytes), bound once and rewritten each step with `writeStep`. */
  createStepBuffer(label = 'AdamW.step'): GPUBuffer {
    return this.device.createBuffer({ label, size: 32, usage: UNIFORM | COPY_DST });
  }

  writeStep(buffer: GPUBuffer, scalars: AdamWStepScalars): void {
    this.device.queue.writeBuffer(buffer, 0, adamwStepWords(scalars));
  }

  /**
   * One dispatch per coalesced range and per binding-sized chunk of it. `maxBindingBytes`
   * (default: the device's maxStorageBufferBindingSize) caps each view.
   */
  update(
    buffers: AdamWBuffers,
    ranges: AdamWRange[],
    step: GPUBuffer,
    options: { maxBindingBytes?: number } = {},
  ): BoundKernel {
    const { params, grads, m, v } = buffers;
    for (const buffer of [grads, m, v]) {
      if (buffer.size < params.size) throw new RangeError(`AdamW: ${buffer.label} is smaller than ${params.label}`);
    }
    const limits = {
      minStorageBufferOffsetAlignment: this.device.limits.minStorageBufferOffsetAlignment,
      maxStorageBufferBindingSize: Math.min(
        options.maxBindingBytes ?? Number.POSITIVE_INFINITY,
        this.device.limits.maxStorageBufferBindingSize,
      ),
    };
    // Without a clip buffer the gradient is scaled by 1 from a buffer this binding owns.
    const ones = buffers.gradScale ? null : createStorageBuffer(this.device, 'AdamW.unitScale', new Float32Array([1]));
    const scale = buffers.gradScale ?? { view: { buffer: ones as GPUBuffer }, index: 0 };
    const maxGroups = this.device.limits.maxComputeWorkgroupsPerDimension;
    const kernels: BoundKernel[] = [];
    for (const range of coalesceRanges(ranges)) {
      for (const chunk of chunkRange(limits, params, range.offset, range.n, 'AdamW.params')) {
        const view = (buffer: GPUBuffer): TensorView => ({ ...chunk.view, buffer });
        kernels.push(
          bindKernel(
            this.device,
            `AdamW.update[${range.offset}+${chunk.rangeOffset}]`,
            this.pipeline,
            [view(params), view(grads), view(m), view(v), scale.view, { buffer: step }],
            [chunk.start, chunk.n, f32Bits(range.weightDecay), scale.index],
            [Math.min(ceilDiv(chunk.n, this.workgroupSize), maxGroups)],
          ),
        );
      }
    }
    const all = sequence('AdamW.update', kernels);
    return {
      label: all.label,
      dispatch: (pass) => all.dispatch(pass),
      destroy() {
        all.destroy();
        ones?.destroy();
      },
    };
  }
}

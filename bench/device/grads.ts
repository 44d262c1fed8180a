/**
 * The gradient part: the WebGPU engine's loss and gradients (`shoal grads`' path) against a
 * float64 reference, for the same parameters and batch: PyTorch autograd on the GPU there
 * (torch_step.py's grads op), Shoal's CPU engine in float64 where PyTorch takes no part (--local).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gpuGradients } from '../../apps/cli/src/grads-webgpu.ts';
import { CpuGpt } from '../../packages/model/src/cpu/gpt.ts';
import { compareGradients } from '../../packages/model/src/gradient-check.ts';
import { initParameters } from '../../packages/model/src/init.ts';
import { buildLayout, type ParamLayout } from '../../packages/model/src/layout.ts';
import { pythonCandidates, startTorch, type TorchChild, writeParamsFile } from '../torch-child.ts';
import { benchBatches } from '../train-steps.ts';
import { errorMessage, type PartOutput } from './output.ts';
import type { DevicePlan, Shape } from './plan.ts';

export interface TensorGradError {
  name: string;
  /** ‖got − ref‖₂ / ‖ref‖₂ over the tensor. */
  relativeNorm: number;
  /** max |got − ref| / max |ref| over the tensor (compareGradients' measure). */
  relativeMax: number;
}

export interface GradRow {
  shape: string;
  B: number;
  T: number;
  parameters: number;
  reference?: string;
  shoalLoss?: number;
  referenceLoss?: number;
  adapter?: string;
  ok?: boolean;
  worstNorm?: TensorGradError;
  worstMax?: TensorGradError & { index: number; got: number; want: number };
  tensors?: TensorGradError[];
  error?: string;
}

export interface GradsPart {
  tolerance: number;
  reference: string;
  rows: GradRow[];
}

/** Per-tensor relative L2 error, beside compareGradients' max-relative measure. */
export function relativeNorms(layout: ParamLayout, got: ArrayLike<number>, ref: ArrayLike<number>): number[] {
  return layout.tensors.map((t) => {
    let diff = 0;
    let norm = 0;
    for (let i = t.offset; i < t.offset + t.size; i++) {
      const r = ref[i] as number;
      const d = (got[i] as number) - r;
      diff += d * d;
      norm += r * r;
    }
    return norm === 0 ? (diff === 0 ? 0 : Number.POSITIVE_INFINITY) : Math.sqrt(diff / norm);
  });
}

type Reference = (
  shape: Shape,
  layout: ParamLayout,
  params: Float32Array,
  inputs: Int32Array,
  targets: Int32Array,
) => Promise<{ loss: number; grads: Float64Array }>;

function cpuReference(): Reference {
  return async ({ config, B, T }, layout, params, inputs, targets) => {
    const model = new CpuGpt<Float64Array>(config, B, T, Float64Array);
    try {
      const params64 = Float64Array.from(params);
      const loss = model.forward(params64, inputs, targets);
      const grads = new Float64Array(layout.size);
      model.backward(params64, grads);
      return { loss, grads };
    } finally {
      model.destroy();
    }
  };
}

function torchReference(child: TorchChild, dir: string): Reference {
  return async ({ config, B, T }, layout, params, inputs, targets) => {
    const paramsFile = writeParamsFile(join(dir, 'params.f32'), params);
    const gradsFile = join(dir, 'grads.f64');
    const loss = await child.grads({ config, layout, B, T, params, paramsFile, inputs, targets, gradsFile });
    const bytes = readFileSync(gradsFile);
    if (bytes.byteLength !== 8 * layout.size) {
      throw new Error(`torch_step.py wrote ${bytes.byteLength} bytes of gradients, expected ${8 * layout.size}`);
    }
    // A fresh copy: readFileSync's buffer may be a slice of a pool with any alignment.
    const grads = new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    rmSync(paramsFile, { force: true });
    rmSync(gradsFile, { force: true });
    return { loss, grads };
  };
}

export async function gradsPart(
  out: PartOutput<GradsPart>,
  plan: DevicePlan,
  options: { python?: string; deadline: number },
): Promise<boolean> {
  const rows: GradRow[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'shoal-device-grads-'));
  let child: TorchChild | null = null;
  let reference: Reference;
  try {
    if (!plan.torch) {
      reference = cpuReference();
      out.update({ reference: 'Shoal CPU engine, float64 (--local)' });
    } else {
      const started = await startTorch(pythonCandidates(options.python), cpus().length, undefined, 'cuda');
      if (!('child' in started)) throw new Error(`no PyTorch with CUDA: ${started.missing.join('; ')}`);
      child = started.child;
      reference = torchReference(child, dir);
      out.update({ reference: `PyTorch ${child.hello.torch} autograd, float64, ${child.hello.device ?? 'cuda'}` });
    }
    let ok = true;
    for (const shape of plan.grads) {
      const { config, B, T } = shape;
      const layout = buildLayout(config);
      const row: GradRow = { shape: shape.name, B, T, parameters: layout.size };
      rows.push(row);
      if (performance.now() > options.deadline) {
        row.error = 'skipped: the part’s time budget is spent';
        ok = false;
        continue;
      }
      try {
        const params = initParameters(layout, 7);
        const [batch] = benchBatches(config, B, T, 1, 7);
        if (!batch) throw new Error('no batch');
        const shoal = await gpuGradients(config, params, batch.inputs, batch.targets, B, T);
        const ref = await reference(shape, layout, params, batch.inputs, batch.targets);
        const comparison = compareGradients(layout, shoal.grads, ref.grads, plan.gradTolerance);
        const norms = relativeNorms(layout, shoal.grads, ref.grads);
        const tensors = layout.tensors.map((t, i) => ({
          name: t.name,
          relativeNorm: norms[i] as number,
          relativeMax: (comparison.tensors[i] as { relative: number }).relative,
        }));
        const worstNorm = tensors.reduce((a, b) => (!(b.relativeNorm <= a.relativeNorm) ? b : a));
        const w = comparison.worst;
        Object.assign(row, {
          reference: plan.torch ? 'pytorch-float64' : 'cpu-float64',
          adapter: shoal.adapter,
          shoalLoss: shoal.loss,
          referenceLoss: ref.loss,
          ok: comparison.ok,
          worstNorm,
          worstMax: {
            name: w.name,
            relativeMax: w.relative,
            relativeNorm: tensors.find((t) => t.name === w.name)?.relativeNorm ?? Number.NaN,
            index: w.index,
            got: w.got,
            want: w.want,
          },
          tensors,
        });
        if (!comparison.ok) ok = false;
        console.log(`grads ${shape.name} B${B} T${T}: ${comparison.message.split('\n')[0]}`);
      } catch (error) {
        row.error = errorMessage(error);
        ok = false;
        console.log(`grads ${shape.name}: ${row.error}`);
      }
      out.update({ rows });
    }
    return ok;
  } finally {
    await child?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

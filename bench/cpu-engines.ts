/**
 * bench:engine's CPU section: Shoal's CPU engine against PyTorch (eager, its BLAS) at 1 and 2
 * threads, and TF.js-WASM on nano, on the same model, init, batches and step (forward, backward,
 * clipping at 1.0, AdamW 0.9/0.95 with decay 0.1 on 2-D tensors, lr 1e-3).
 *
 * Engines take turns within one run: after a warm-up, each round runs `steps` steps of every
 * engine in an order rotated each round; an engine's figure is the median of its runs' medians,
 * so a burst of load from whoever shares the machine moves one run, not the result (cpu-shape.ts).
 * Needs no GPU. PyTorch runs in torch_step.py child processes, one per thread count, which
 * inherit the environment (OMP_WAIT_POLICY, for one).
 */
import { PRESETS, trainingStepFlops } from '../packages/model/src/config.ts';
import { type CpuShape, type CpuTableRow, formatCpuTable } from './cpu-compare.ts';
import { type CpuShapeReport, compareShape } from './cpu-shape.ts';
import { measureTfjsStep } from './tfjs.ts';
import { pythonCandidates, startTorch, TORCH_INSTALL_HINT, type TorchChild, type TorchHello } from './torch-child.ts';

export interface CpuComparisonOptions {
  shapes: CpuShape[];
  /** PyTorch's thread counts (torch.set_num_threads). */
  threads: number[];
  /** Shoal's thread counts (CpuBackendOptions.threads). */
  shoalThreads: number[];
  rounds: number;
  /** Steps per engine per round. */
  steps: number;
  /** Untimed steps per engine first; their losses are compared across engines. */
  warmup: number;
  torch: boolean;
  /** The Python to run torch_step.py with (else SHOAL_PYTHON, python3, /usr/bin/python3). */
  python?: string;
  tfjs: boolean;
}

export interface CpuComparison {
  rows: CpuTableRow[];
  shapes: CpuShapeReport[];
  torch: TorchHello | null;
  /** Why PyTorch did not run, where it did not. */
  torchMissing?: string;
  rounds: number;
  steps: number;
  warmup: number;
  node: string;
}

async function startTorchChildren(options: CpuComparisonOptions) {
  const children: TorchChild[] = [];
  if (!options.torch) return { children, missing: 'not asked for (--no-torch)' };
  const pythons = pythonCandidates(options.python);
  for (const threads of options.threads) {
    const started = await startTorch(pythons, threads);
    if ('missing' in started) {
      for (const child of children) await child.close();
      return { children: [], missing: TORCH_INSTALL_HINT.replace('%s', started.missing.join('; ')) };
    }
    children.push(started.child);
  }
  return { children };
}

/**
 * TF.js-WASM as before: nano's 1,024-token step, measured alone after every other engine (about
 * 0.4 s a step; its Emscripten module takes over uncaught exceptions, so nothing runs after it).
 */
async function tfjsWasmRow(steps: number): Promise<CpuTableRow> {
  const config = PRESETS.nano;
  const [B, T] = [16, 64];
  const cpu = process.cpuUsage();
  const start = performance.now();
  const wasm = await measureTfjsStep({ backend: 'wasm', config, B, T, warmup: 1, steps });
  const used = process.cpuUsage(cpu);
  const coresBusy = (used.user + used.system) / 1000 / (performance.now() - start);
  console.log(
    `\n${wasm.device}, nano ${B}×${T}: ${wasm.msPerStep.toFixed(1)} ms per step, first loss ${wasm.firstLoss.toFixed(5)}`,
  );
  const flops = trainingStepFlops(config, B, T);
  return {
    preset: 'nano',
    B,
    T,
    flops,
    engine: 'TF.js-WASM',
    threads: 1,
    msPerStep: wasm.msPerStep,
    runMedians: [],
    coresBusy,
    alone: true,
  };
}

export async function runCpuComparison(options: CpuComparisonOptions): Promise<CpuComparison> {
  const { shapes, rounds, steps, warmup } = options;
  const { children, missing } = await startTorchChildren(options);
  const hello = children[0]?.hello ?? null;
  if (missing && options.torch) console.log(missing);
  if (hello) {
    console.log(
      `PyTorch ${hello.torch} (Python ${hello.python}, ${hello.executable}), BLAS: ${hello.blas ?? 'none found'}`,
    );
    if (!hello.blas?.includes('openblas')) {
      console.log('  not OpenBLAS: with the reference BLAS PyTorch is several times slower, not a fair anchor');
    }
  }
  const rows: CpuTableRow[] = [];
  const reports: CpuShapeReport[] = [];
  const settings = { shoalThreads: options.shoalThreads, torchThreads: options.threads, rounds, steps, warmup };
  try {
    for (const shape of shapes) {
      const result = await compareShape(shape, settings, children);
      console.log(formatCpuTable(result.rows));
      rows.push(...result.rows);
      reports.push(result.report);
    }
  } finally {
    for (const child of children) await child.close();
  }
  const nano = shapes.some(({ preset, B, T }) => preset === 'nano' && B === 16 && T === 64);
  if (options.tfjs && nano) {
    const row = await tfjsWasmRow(steps);
    const afterNano = rows.findLastIndex((r) => r.preset === 'nano' && r.B === 16 && r.T === 64) + 1;
    rows.splice(afterNano, 0, row);
  }
  console.log(`\nCPU engines, medians of ${rounds} alternated runs of ${steps} steps (after ${warmup} warm-up)`);
  console.log(formatCpuTable(rows));
  return {
    rows,
    shapes: reports,
    torch: hello,
    ...(missing ? { torchMissing: missing } : {}),
    rounds,
    steps,
    warmup,
    node: process.version,
  };
}

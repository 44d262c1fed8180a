/**
 * The Node side of bench:device, bundled into .device/device.mjs and run by .device/run.sh on
 * the GPU machine (docs/device-bench.md). One part per process, so one that fails or hangs leaves
 * the others their measurements:
 *
 *   node device.mjs adapter|grads|steps|kernels|precision [--out DIR] [--local [--torch]] [--python python3]
 *   node device.mjs budgets [--local]          each part's time budget in seconds, one per line
 *   node device.mjs report --out DIR [--status adapter=0,grads=0,steps=124,kernels=0,precision=0]
 *
 * A part writes DIR/<part>.json as it goes and exits 0 when everything it measured passed,
 * 1 when something failed, 124 when it ran out of its time budget. --local: this machine's
 * software adapter, tiny shapes, and no PyTorch (the gradient reference is the CPU engine);
 * --torch with it speaks to PyTorch all the same (the smoke test's stand-in for torch_step.py).
 */
import { parseArgs } from 'node:util';
import { type AdapterPart, adapterPart } from './adapter.ts';
import { type GradsPart, gradsPart } from './grads.ts';
import { type KernelsPart, kernelsPart } from './kernels.ts';
import { PartOutput } from './output.ts';
import { devicePlan, PART_NAMES, type PartName } from './plan.ts';
import { type PrecisionPart, precisionPart } from './precision.ts';
import { writeSummary } from './report.ts';
import { type StepsPart, stepsPart } from './steps.ts';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string', default: process.env.OUT || 'out' },
    local: { type: 'boolean', default: false },
    torch: { type: 'boolean', default: false },
    python: { type: 'string' },
    status: { type: 'string', default: '' },
  },
});
const command = positionals[0] ?? '';
const out = args.out ?? 'out';
const plan = devicePlan(args.local ?? false, !args.local || args.torch === true);
const isPart = (name: string): name is PartName => (PART_NAMES as readonly string[]).includes(name);

async function runPart(part: PartName): Promise<number> {
  const budget = plan.budgets[part];
  const deadline = performance.now() + budget * 1000 * 0.85; // the rest: closing down, the last row
  const env = { VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES, SHOAL_ADAPTER: process.env.SHOAL_ADAPTER };
  const output =
    part === 'adapter'
      ? new PartOutput<AdapterPart>(out, part, { probes: [], env })
      : part === 'grads'
        ? new PartOutput<GradsPart>(out, part, { tolerance: plan.gradTolerance, reference: '', rows: [] })
        : part === 'steps'
          ? new PartOutput<StepsPart>(out, part, { rows: [] })
          : part === 'kernels'
            ? new PartOutput<KernelsPart>(out, part, { rows: [] })
            : new PartOutput<PrecisionPart>(out, part, { matmul: [] });
  // Past its budget a part stops where it is; what it wrote stays (complete: false).
  const timer = setTimeout(() => {
    output.fail(new Error(`stopped at its time budget of ${budget} s`));
    process.exit(124);
  }, budget * 1000);
  try {
    const python = args.python ? { python: args.python } : {};
    const ok =
      part === 'adapter'
        ? await adapterPart(output as PartOutput<AdapterPart>)
        : part === 'grads'
          ? await gradsPart(output as PartOutput<GradsPart>, plan, { ...python, deadline })
          : part === 'steps'
            ? await stepsPart(output as PartOutput<StepsPart>, plan, { ...python, deadline })
            : part === 'kernels'
              ? await kernelsPart(output as PartOutput<KernelsPart>, plan, deadline)
              : await precisionPart(output as PartOutput<PrecisionPart>, plan, deadline);
    output.finish();
    return ok ? 0 : 1;
  } catch (error) {
    output.fail(error);
    console.error(`${part}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    clearTimeout(timer);
  }
}

function parseStatus(text: string): Partial<Record<PartName, number>> {
  const status: Partial<Record<PartName, number>> = {};
  for (const item of text.split(',').filter(Boolean)) {
    const [name = '', code = ''] = item.split('=');
    if (isPart(name) && /^\d+$/.test(code)) status[name] = Number(code);
  }
  return status;
}

let code = 0;
if (isPart(command)) {
  code = await runPart(command);
} else if (command === 'budgets') {
  for (const part of PART_NAMES) console.log(`${part} ${plan.budgets[part]}`);
} else if (command === 'report') {
  console.log(writeSummary(out, parseStatus(args.status ?? '')));
} else {
  console.error(`usage: device.mjs ${PART_NAMES.join('|')}|budgets|report [--out DIR] [--local] [--python P]`);
  code = 2;
}
// Dawn keeps the event loop alive.
process.exit(code);

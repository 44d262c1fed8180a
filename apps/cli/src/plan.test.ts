import { plan } from '@shoal/room/plan';
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { RUN_OPTIONS } from '@shoal/room/run-options';
import { dryRunInputs, simulateMethod } from '@shoal/sim';
import type { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { type HostCliOptions, runConfigFrom } from './host.ts';
import { createProgram } from './program.ts';

function command(name: string): Command {
  const found = createProgram().commands.find((c) => c.name() === name);
  if (!found) throw new Error(`no ${name} command`);
  return found.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
}

/** What `shoal plan <args>` prints, and the exit code it sets. */
async function shoalPlan(args: string[]): Promise<{ lines: string[]; errors: string[]; exitCode: number }> {
  const lines: string[] = [];
  const errors: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: string) => lines.push(line));
  const error = vi.spyOn(console, 'error').mockImplementation((line: string) => errors.push(line));
  const before = process.exitCode;
  process.exitCode = 0;
  try {
    await command('plan').parseAsync(args, { from: 'user' });
    return { lines, errors, exitCode: Number(process.exitCode ?? 0) };
  } finally {
    process.exitCode = before;
    log.mockRestore();
    error.mockRestore();
  }
}

/** The options `shoal <name>` parses from `args` (its action replaced: nothing runs). */
async function parsedBy(name: 'host' | 'simulate' | 'plan', args: string[]): Promise<Record<string, unknown>> {
  const cmd = command(name);
  let seen: Record<string, unknown> = {};
  cmd.action((options) => {
    seen = options;
  });
  await cmd.parseAsync(args, { from: 'user' });
  return seen;
}

const SMALL_8 = ['--preset', 'small', '--workers', '8', '--link-mbps', '10', '--gpu-tflops', '10'];

describe('shoal plan', () => {
  it('--as-flags prints flags that shoal host and shoal simulate both parse to the plan', async () => {
    const { lines } = await shoalPlan([...SMALL_8, '--as-flags']);
    expect(lines).toHaveLength(1);
    const flags = (lines[0] as string).split(' ');
    const { options } = plan({ preset: 'small', workers: 8, linkMbps: 10, latencyMs: 50, gpuTflops: 10 });
    expect(flags).not.toContain('--steps');
    expect(flags).not.toContain('--tokens');

    const host = await parsedBy('host', ['--server', 'http://x', ...flags]);
    expect(host).toMatchObject(options);
    const config = runConfigFrom(host as unknown as HostCliOptions);
    expect(config.diloco).toMatchObject({
      innerSteps: options.innerSteps,
      fragments: options.fragments,
      overlap: options.overlap,
      codec: options.codec,
      outerLr: options.outerLr,
    });
    expect(config.train).toMatchObject({ batchSize: options.batch, seqLen: options.seq, maxLr: options.lr });

    const simulate = await parsedBy('simulate', [...flags, '--dry-run']);
    expect(simulate).toMatchObject({ ...options, dryRun: true });
  });

  it('--json ends with one line whose last key is the options, named as the run options', async () => {
    const { lines } = await shoalPlan([...SMALL_8, '--json']);
    const last = lines.at(-1) as string;
    const parsed = JSON.parse(last);
    expect(Object.keys(parsed).at(-1)).toBe('options');
    expect(last.endsWith(`"options":${JSON.stringify(parsed.options)}}`)).toBe(true);
    expect(Object.keys(parsed.options)).toEqual([
      'preset',
      'innerSteps',
      'fragments',
      'overlap',
      'codec',
      'lr',
      'batch',
      'seq',
      'outerLr',
    ]);
    expect(parsed.fit.expectedLoss).toBeNull();
  });

  it('prints a table with the utilisation, round vs τ·step, bytes and the loss or "extrapolated"', async () => {
    const small = (await shoalPlan(SMALL_8)).lines.join('\n');
    expect(small).toMatch(/utilisation\s+\d+\.\d% predicted/);
    expect(small).toMatch(/round vs τ·step\s+[\d.]+ s vs [\d.]+ s/);
    expect(small).toMatch(/bytes per round\s+[\d.]+ MB/);
    expect(small).toMatch(/expected loss\s+extrapolated: no prediction/);
    const inRange = (await shoalPlan(['--params', '1e8', '--link-mbps', '100'])).lines.join('\n');
    expect(inRange).toMatch(/expected loss\s+3\.\d{3}/);
  });

  it('plan and simulate model the same room by default, ROOM_MODEL_DEFAULTS, and their help shows it', async () => {
    const { workers, gpuTflops, linkMbps, latencyMs } = ROOM_MODEL_DEFAULTS;
    expect(await parsedBy('simulate', [])).toMatchObject({ workers, gpuTflops, linkMbps, latencyMs });
    // plan's --gpu-tflops has no commander default (it would reach the planner beside --tokens-per-second) …
    const planned = await parsedBy('plan', ['--preset', 'small']);
    expect(planned).toMatchObject({ workers, linkMbps, latencyMs });
    expect(planned.gpuTflops).toBeUndefined();
    // … the planner applies it, and the table says which
    const table = (await shoalPlan(['--preset', 'small'])).lines[0];
    expect(table).toBe(
      `small (10.8M params), ${workers} volunteers at ${gpuTflops} TFLOP/s, ${linkMbps} Mbit/s, ${latencyMs} ms`,
    );
    expect(plan({ preset: 'small', workers, linkMbps, latencyMs }).timing.stepMs).toBe(
      plan({ preset: 'small', workers, linkMbps, latencyMs, gpuTflops }).timing.stepMs,
    );
    for (const name of ['plan', 'simulate']) {
      // one entry per option, its wrapped description joined
      const entries = command(name)
        .helpInformation()
        .split(/\n\s+(?=-)/)
        .map((entry) => entry.replace(/\s+/g, ' '));
      const entry = (flag: string) => entries.find((e) => e.startsWith(`${flag} `)) ?? `no ${flag} in ${name}'s help`;
      expect(entry('--workers <M>')).toMatch(new RegExp(`\\(default: ${workers}\\)$`));
      expect(entry('--gpu-tflops <n>')).toMatch(new RegExp(`default: ${gpuTflops}\\b`));
      expect(entry('--link-mbps <n>')).toMatch(new RegExp(`\\(default: ${linkMbps}\\)$`));
      expect(entry('--latency-ms <ms>')).toMatch(new RegExp(`\\(default: ${latencyMs}\\)$`));
    }
  });

  it('refuses bad input with one clear line and exit code 1', async () => {
    const usage = await shoalPlan(['--params', '1e8', '--as-flags']);
    expect(usage.exitCode).toBe(1);
    expect(usage.errors).toEqual([
      'shoal: --as-flags needs --preset: shoal host and shoal simulate train presets only',
    ]);
    expect((await shoalPlan([])).errors).toEqual([
      'shoal: give the model as a preset name or as a parameter count, one of the two',
    ]);
    expect((await shoalPlan(['--preset', 'small', '--seq', '1024'])).errors).toEqual([
      "shoal: the sequence length must be 2 … 256 (the model's block size), got 1024",
    ]);
    await expect(command('plan').parseAsync(['--preset', 'huge'], { from: 'user' })).rejects.toThrow(
      /unknown model "huge"/,
    );
    await expect(command('plan').parseAsync(['--preset', 'small', '--params', '5'], { from: 'user' })).rejects.toThrow(
      /cannot be used with/,
    );
    await expect(
      command('plan').parseAsync(['--preset', 'small', '--link-mbps', '0'], { from: 'user' }),
    ).rejects.toThrow(/expected a number > 0/);
  });

  // Needs the strict τ (a worker blocks τ steps after contributing when its round has not
  // committed); before it, a worker waited up to H steps, which this plan does not rely on either.
  it('small, 8 volunteers, 10 Mbit/s, 10 TFLOP/s: a dry run of the plan keeps compute ≥ 95%', async () => {
    const { options } = plan({ preset: 'small', workers: 8, linkMbps: 10, latencyMs: 50, gpuTflops: 10 });
    const workers = 8;
    const result = await simulateMethod('streaming-fp4', {
      preset: 'small',
      workers,
      batch: options.batch,
      seqLen: options.seq,
      lr: options.lr,
      innerSteps: options.innerSteps,
      fragments: options.fragments,
      overlap: options.overlap,
      alpha: 0.5,
      codec: options.codec as 'fp4',
      codecBlockSize: RUN_OPTIONS.blockSize.default,
      outerLr: options.outerLr,
      // two rounds of every fragment (a dry run's cost is the encoding, per round)
      tokens: 2 * options.innerSteps * workers * options.batch * options.seq,
      seed: 1,
      gpuTflops: 10,
      linkMbps: 10,
      latencyMs: 50,
      ...dryRunInputs(options.seq),
    });
    console.log(
      `plan small/8/10 Mbit/s/10 TFLOP/s: ${JSON.stringify(options)}, utilisation ${result.computeUtilization}`,
    );
    expect(result.abortedRounds).toBe(0);
    expect(result.computeUtilization).toBeGreaterThanOrEqual(0.95);
  }, 600_000);
});

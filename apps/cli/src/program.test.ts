import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { HOST_DEFAULTS } from '@shoal/room/host-defaults';
import { RUN_OPTION_NAMES, RUN_OPTIONS } from '@shoal/room/run-options';
import type { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { type HostCliOptions, runConfigFrom } from './host.ts';
import { createProgram } from './program.ts';
import { withRunOptionsMarkdown } from './run-options.ts';

function command(name: string): Command {
  const found = createProgram().commands.find((c) => c.name() === name);
  if (!found) throw new Error(`no ${name} command`);
  return found.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
}

/** `--help`'s text, one option per line (commander wraps long help to the terminal's width). */
function help(name: string): string {
  return command(name).configureHelp({ helpWidth: 10_000 }).helpInformation();
}

describe("the CLI's run options agree with the table", () => {
  for (const which of ['host', 'simulate'] as const) {
    it(`shoal ${which} --help lists every run option it offers with the table's help and default`, () => {
      const text = help(which);
      for (const name of RUN_OPTION_NAMES) {
        const spec = RUN_OPTIONS[name];
        const line = text.split('\n').find((l) => l.trimStart().startsWith(`${spec.flag} <${spec.metavar}>`));
        if (which === 'simulate' && !spec.simulate) {
          expect(line, `${spec.flag} is not a simulate option`).toBeUndefined();
          continue;
        }
        expect(line, `${spec.flag} in shoal ${which} --help`).toBeDefined();
        expect(line).toContain(spec.help);
        expect(line).toContain(`(default: ${JSON.stringify(spec.default)})`);
        if (spec.kind === 'choice') expect(line).toContain(spec.choices.join(' | '));
      }
    });
  }

  it('parses each option with the table’s parser: defaults, values and refusals', async () => {
    const host = command('host');
    let seen: Record<string, unknown> = {};
    host.action((options) => {
      seen = options;
    });
    await host.parseAsync(['--server', 'http://x', '--outer-lr', '0.5', '--block-size', '32', '--codec', 'int8'], {
      from: 'user',
    });
    expect(seen).toMatchObject({ outerLr: 0.5, blockSize: 32, codec: 'int8', innerSteps: 50, seed: 1, lr: 3e-3 });
    for (const name of RUN_OPTION_NAMES) expect(seen[name]).toBeDefined();
    // every run option reaches the room's config
    const config = runConfigFrom(seen as unknown as HostCliOptions);
    expect(config.diloco).toMatchObject({ outerLr: 0.5, codecBlockSize: 32, codec: 'int8', innerSteps: 50 });
    expect(config.train).toMatchObject({ seqLen: 64, seed: 1, maxLr: 3e-3 });
    await host.parseAsync(['--server', 'http://x', '--seq', '32', '--preset', 'tiny', '--data', '/tmp/a.txt'], {
      from: 'user',
    });
    expect(runConfigFrom(seen as unknown as HostCliOptions)).toMatchObject({
      train: { seqLen: 32 },
      model: { nLayer: 4 },
      data: { corpus: 'a.txt' },
    });
    await host.parseAsync(['--server', 'http://x', '--seq', '128'], { from: 'user' });
    expect(() => runConfigFrom(seen as unknown as HostCliOptions)).toThrow(/block size 64/);
    await expect(host.parseAsync(['--server', 'http://x', '--alpha', '2'], { from: 'user' })).rejects.toThrow(
      /--alpha <α>' argument '2' is invalid. at most 1/,
    );
    await expect(host.parseAsync(['--server', 'http://x', '--codec', 'zip'], { from: 'user' })).rejects.toThrow(
      /unknown codec "zip"/,
    );
  });

  it("shoal host's timing defaults are HOST_DEFAULTS.cli", () => {
    const options = command('host').options;
    const defaults = Object.fromEntries(options.map((o) => [o.attributeName(), o.defaultValue]));
    expect(defaults).toMatchObject(HOST_DEFAULTS.cli);
  });

  it('train, simulate and attacks share the seed, learning rate and preset defaults', () => {
    for (const name of ['train', 'simulate', 'attacks']) {
      const options = command(name).options;
      const seed = options.find((o) => o.long === '--seed');
      expect(seed?.defaultValue, `${name} --seed`).toBe(RUN_OPTIONS.seed.default);
      const preset = options.find((o) => o.long === '--preset');
      expect(preset?.defaultValue, `${name} --preset`).toBe(RUN_OPTIONS.preset.default);
    }
    const lr = command('train').options.find((o) => o.long === '--lr');
    expect(lr?.defaultValue).toBe(RUN_OPTIONS.lr.default);
  });

  it("docs/cli.md's table is the one `npm run docs` writes from the table", () => {
    const doc = readFileSync(new URL('../../../docs/cli.md', import.meta.url), 'utf8');
    expect(withRunOptionsMarkdown(doc), 'run `npm run docs`').toBe(doc);
  });

  it('shoal simulate runs on the options it parsed (a dry run, in process)', async () => {
    const printed: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((line: string) => printed.push(line));
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      await createProgram().parseAsync(
        ['simulate', '--dry-run', '--tokens', '20000', '--methods', 'streaming-fp4', '--block-size', '32', '--json'],
        { from: 'user' },
      );
    } finally {
      log.mockRestore();
      stderr.mockRestore();
    }
    expect(process.exitCode ?? 0).toBe(0);
    const { methods } = JSON.parse(printed.at(-1) as string);
    expect(methods).toHaveLength(1);
    expect(methods[0]).toMatchObject({ name: 'streaming-fp4', evalLoss: null });
    expect(methods[0].bytesPerWorker).toBeGreaterThan(0);
  });
});

describe('--threads', () => {
  const threadsDefault = () =>
    createProgram()
      .commands.find((c) => c.name() === 'train')
      ?.options.find((o) => o.long === '--threads')?.defaultValue;

  it('defaults to every core (at most 8), or to SHOAL_CPU_THREADS where set, on train and worker', () => {
    const saved = process.env.SHOAL_CPU_THREADS;
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      delete process.env.SHOAL_CPU_THREADS;
      expect(threadsDefault()).toBe(Math.min(8, availableParallelism()));
      process.env.SHOAL_CPU_THREADS = '3';
      expect(threadsDefault()).toBe(3);
      const worker = createProgram().commands.find((c) => c.name() === 'worker');
      expect(worker?.options.find((o) => o.long === '--threads')?.defaultValue).toBe(3);
      process.env.SHOAL_CPU_THREADS = 'many';
      expect(threadsDefault()).toBe(Math.min(8, availableParallelism()));
      expect(error).toHaveBeenCalledWith(expect.stringMatching(/SHOAL_CPU_THREADS must be a positive integer/));
    } finally {
      if (saved === undefined) delete process.env.SHOAL_CPU_THREADS;
      else process.env.SHOAL_CPU_THREADS = saved;
      error.mockRestore();
    }
  });
});

/**
 * `shoal simulate --pipeline-stages S` and `--max-memory`: each worker a replica of S stage
 * volunteers; the cap picks S or refuses one that does not fit.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseBytes } from './simulate.ts';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

function simulate(args: string[]) {
  const result = spawnSync(process.execPath, [shoal, 'simulate', ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').at(-1) ?? '');

describe('parseBytes', () => {
  it.each([
    ['4000000', 4_000_000],
    ['4e6', 4_000_000],
    ['512MB', 512_000_000],
    ['512 mb', 512_000_000],
    ['1.5GiB', 1.5 * 2 ** 30],
    ['64KiB', 65_536],
    ['2g', 2e9],
    ['.5kB', 500],
  ])('reads %s as %d bytes', (text, bytes) => {
    expect(parseBytes(text)).toBe(bytes);
  });

  it.each(['', 'MB', '12XB', '-4MB', '0', '0.1', '1e400'])('refuses %j', (text) => {
    expect(() => parseBytes(text)).toThrow(/not a size/);
  });
});

describe('shoal simulate with pipeline replicas', () => {
  it('--max-memory below nano’s need picks 2 stages; the dry run prints S, M, bubble and activation bytes', () => {
    // nano, batch 16 × 64: the whole model needs 33 392 640 bytes; 2 stages 5 238 272 and 3 569 152
    const args = ['--tokens', '40000', '--methods', 'streaming-fp4', '--max-memory', '16MB', '--dry-run'];
    const text = simulate(args);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      /pipeline: S 2 × M 8 1f1b, f32 activations, stage link 1000 Mbit\/s 0.5 ms; bubble \d+\.\d%, activations 524\.3 kB\/step, step [\d.]+ ms; memory per volunteer 5\.00 MiB \/ 3\.40 MiB, cap 15\.26 MiB \(whole model 31\.85 MiB\)/,
    );
    const { status, stdout, stderr } = simulate([...args, '--json']);
    expect(status, stderr).toBe(0);
    const { pipeline, methods } = lastJson(stdout);
    expect(methods[0].evalLoss).toBeNull();
    expect(pipeline).toMatchObject({
      stages: 2,
      micros: 8,
      schedule: '1f1b',
      activations: 'f32',
      // one hop × 8 micro-batches × 2 directions × 2·64·64 values × 4 bytes
      activationBytesPerStep: 524_288,
      stageBytes: [5_238_272, 3_569_152],
      wholeModelBytes: 33_392_640,
      maxMemoryBytes: 16_000_000,
    });
    expect(pipeline.bubbleFraction).toBeGreaterThan(0);
    expect(pipeline.bubbleFraction).toBeLessThan(1);
  });

  it('trains nano under the cap to within 1% of the uncapped run', { timeout: 120_000 }, () => {
    const args = ['--tokens', '16000', '--batch', '4', '--inner-steps', '10', '--methods', 'streaming-fp4', '--json'];
    const uncapped = simulate(args);
    expect(uncapped.status, uncapped.stderr).toBe(0);
    // batch 4: the whole model needs 10.03 MiB
    const capped = simulate([...args, '--max-memory', '8MB']);
    expect(capped.status, capped.stderr).toBe(0);
    const a = lastJson(uncapped.stdout);
    const b = lastJson(capped.stdout);
    expect(a.pipeline).toBeUndefined();
    expect(b.pipeline.stages).toBe(2);
    const [before, after] = [a.methods[0].evalLoss, b.methods[0].evalLoss];
    expect(before).toBeLessThan(5.4);
    expect(Math.abs(after - before) / before).toBeLessThan(0.01);
  });

  it.each([
    [
      ['--pipeline-stages', '2', '--max-memory', '5MB'],
      /--max-memory: 2 pipeline stages do not fit a memory cap of 4\.77 MiB: stage 0 needs 5\.00 MiB, 232\.69 KiB over/,
    ],
    [
      ['--max-memory', '3MB'],
      /--max-memory: no pipeline fits a cap of 2\.86 MiB: with 2 stages \(one block each, M = 8, 1f1b\) stage 0 still needs 5\.00 MiB, 2\.13 MiB over the cap/,
    ],
    [
      ['--pipeline-stages', '1', '--max-memory', '16MB'],
      /1 pipeline stage \(the whole model\) does not fit a memory cap of 15\.26 MiB: stage 0 needs 31\.85 MiB, 16\.59 MiB over; 2 stages fit/,
    ],
    [['--max-memory', '12XB'], /'--max-memory <bytes>' argument '12XB' is invalid. "12XB" is not a size/],
    [['--pipeline-stages', '2', '--backend', 'webgpu'], /pipeline stages train on the CPU in the simulator/],
    [['--pipeline-stages', '2', '--stage-link-mbps', '0'], /--stage-link-mbps must be a number > 0, got 0/],
  ])('refuses %j with one line and exit 1', (args, message) => {
    const { status, stderr } = simulate(args as string[]);
    expect(status).toBe(1);
    expect(stderr).toMatch(message as RegExp);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});

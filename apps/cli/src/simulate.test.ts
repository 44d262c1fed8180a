import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bitsPerByte } from '@shoal/data';
import { describe, expect, it } from 'vitest';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

function simulate(args: string[]) {
  const result = spawnSync(process.execPath, [shoal, 'simulate', ...args], { encoding: 'utf8', timeout: 240_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('shoal simulate', () => {
  it('trains every method and ends with the JSON line of the contract, curves in --csv', { timeout: 240_000 }, () => {
    const csv = mkdtempSync(join(tmpdir(), 'shoal-sim-'));
    const { status, stdout, stderr } = simulate([
      '--tokens',
      '60000',
      '--inner-steps',
      '10',
      '--batch',
      '4',
      '--step-ms',
      '200',
      '--csv',
      csv,
      '--json',
    ]);
    expect(status, stderr).toBe(0);
    const last = JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
    expect(last.methods.map((m: { name: string }) => m.name)).toEqual(['dp', 'diloco', 'streaming', 'streaming-fp4']);
    for (const m of last.methods) {
      expect(Object.keys(m).sort()).toEqual(
        [
          'bytesPerWorker',
          'computeUtilization',
          'evalBitsPerByte',
          'evalLoss',
          'name',
          'peakSyncBytes',
          'simSeconds',
        ].sort(),
      );
      expect(m.evalBitsPerByte).toBe(bitsPerByte(m.evalLoss));
      expect(m.evalLoss).toBeGreaterThan(1);
      expect(m.evalLoss).toBeLessThan(5.4); // below ln 256: every method learned something
      expect(m.computeUtilization).toBeGreaterThan(0);
      expect(m.computeUtilization).toBeLessThanOrEqual(1);
      expect(m.simSeconds).toBeGreaterThan(0);
    }
    const [dp, diloco, streaming, fp4] = last.methods;
    // fp4 moves about 7× fewer bytes than fp32 streaming; every DiLoCo variant far fewer than
    // data-parallel (here H = 10, so fp32 streaming about 5× fewer).
    expect(fp4.bytesPerWorker).toBeLessThan(streaming.bytesPerWorker / 5);
    expect(streaming.bytesPerWorker).toBeLessThan(dp.bytesPerWorker / 3);
    // Streaming syncs one fragment of two at a time: its peak per sync is well below DiLoCo's.
    expect(streaming.peakSyncBytes).toBeLessThan(diloco.peakSyncBytes / 1.3);
    expect(readFileSync(join(csv, 'streaming-fp4.csv'), 'utf8')).toMatch(/^tokens,sim_seconds,train_loss\n\d+,/);
    expect(stderr).toMatch(/streaming-fp4 .*\| 60000\/60000 tokens/);
  });

  it('--dry-run models bytes and time without training: evalLoss is null', { timeout: 120_000 }, () => {
    const { status, stdout, stderr } = simulate([
      '--preset',
      'tiny',
      '--tokens',
      '40000',
      '--inner-steps',
      '5',
      '--batch',
      '4',
      '--dry-run',
      '--methods',
      'dp,streaming-fp4',
      '--json',
    ]);
    expect(status, stderr).toBe(0);
    const last = JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
    expect(last.methods.map((m: { evalLoss: unknown }) => m.evalLoss)).toEqual([null, null]);
    expect(last.methods[1].bytesPerWorker).toBeGreaterThan(0);
  });

  it.each([
    [['--methods', 'dp,gossip'], /unknown method gossip/],
    [['--fragments', '3'], /Fragments \(P\): at most the model's 2 layers/],
    [['--codec', 'fp8'], /'--codec <codec>' argument 'fp8' is invalid. unknown codec "fp8": choose fp32, bf16/],
    [
      ['--aggregation', 'median'],
      /'--aggregation <rule>' argument 'median' is invalid. unknown aggregation "median": choose clipped-mean, trimmed-mean, mean/,
    ],
    [['--alpha', '2'], /'--alpha <α>' argument '2' is invalid. at most 1/],
    [['--block-size', '3'], /'--block-size <n>' argument '3' is invalid. a multiple of 2/],
    [['--preset', 'huge'], /huge/],
  ])('refuses %j with one line and exit 1', (args, message) => {
    const { status, stderr } = simulate(args as string[]);
    expect(status).toBe(1);
    expect(stderr).toMatch(message as RegExp);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseManifest } from '@shoal/data';
import { describe, expect, it } from 'vitest';
import { runShoal } from './test-processes.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-data-pack-'));

/** `shoal data pack …`, without blocking, so the cases run side by side. */
const pack = (args: string[]) => runShoal(['data', 'pack', ...args]);

/** ~`bytes` of seeded words and line breaks (an LCG), with multi-byte characters among them. */
function seededText(bytes: number, seed: number): string {
  const words = ['shoal', 'fish', 'café', '漢字', '🐟', 'wave', 'a'];
  let state = seed;
  let text = '';
  while (text.length < bytes) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    text += words[state % words.length] + (state % 13 === 0 ? '\n' : ' ');
  }
  return text;
}

const corpus = join(dir, 'corpus');
mkdirSync(corpus);
writeFileSync(join(corpus, 'one.txt'), seededText(200_000, 1));
writeFileSync(join(corpus, 'two.md'), seededText(90_000, 2));
const records = join(dir, 'records.jsonl');
writeFileSync(records, `${[3, 4, 5].map((seed) => JSON.stringify({ body: seededText(30_000, seed) })).join('\n')}\n`);

describe('shoal data pack', () => {
  it('packs a folder and JSON Lines; --json ends with the four numbers, then the hash', async () => {
    const out = join(dir, 'packed');
    const args = [corpus, records, '--out', out, '--shard-mib', '0.0625', '--validation', '0.25'];
    const { status, stdout, stderr } = await pack([...args, '--text-field', 'body', '--licence', 'CC0', '--json']);
    expect(status, stderr).toBe(0);
    expect(stderr, 'no progress bar when stderr is not a terminal').toBe('');
    const last = (stdout.trim().split('\n').at(-1) as string).trim();
    const result = JSON.parse(last) as Record<string, unknown>;
    expect(Object.keys(result).slice(0, 4)).toEqual(['shards', 'bytes', 'validationShards', 'manifest']);
    const manifestBytes = readFileSync(join(out, 'manifest.json'));
    const loaded = await parseManifest(manifestBytes, out);
    expect(result).toMatchObject({
      shards: loaded.manifest.shards.length,
      bytes: loaded.manifest.bytes,
      validationShards: loaded.validation.length,
      manifest: join(out, 'manifest.json'),
      hash: createHash('sha256').update(manifestBytes).digest('hex'),
      documents: 5,
      skippedLines: 0,
    });
    expect(loaded.manifest).toMatchObject({ name: 'corpus', sources: ['corpus', 'records.jsonl'], licence: 'CC0' });
    expect(loaded.manifest.shardBytes).toBe(64 * 1024);
    expect(loaded.validation.length).toBeGreaterThan(0);
    expect(loaded.train.length).toBeGreaterThan(3);

    // the same input again: refused without --overwrite, the same manifest with it
    const again = await pack([...args, '--text-field', 'body', '--licence', 'CC0']);
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/^shoal: .*packed already holds a dataset \(manifest\.json\).*--overwrite/);
    const replaced = await pack([...args, '--text-field', 'body', '--licence', 'CC0', '--overwrite']);
    expect(replaced.status, replaced.stderr).toBe(0);
    expect(replaced.stdout).toMatch(/^packed 5 documents into \d+ shards \(\d+ train, \d+ validation\), [\d.]+ MiB\n/);
    expect(replaced.stdout).toContain(`manifest ${join(out, 'manifest.json')}\n`);
    expect(replaced.stdout).toContain(`sha256 ${result.hash}\n`);
  });

  it('refuses bad input with one line on stderr and exit code 1', async () => {
    const bad = join(dir, 'bad.txt');
    writeFileSync(bad, Buffer.concat([Buffer.from('fine so far '), Buffer.of(0xc3, 0x28)]));
    const broken = join(dir, 'broken.jsonl');
    writeFileSync(broken, `${JSON.stringify({ text: seededText(300_000, 9) })}\nnot json\n`);
    const out = (name: string) => ['--out', join(dir, name)];
    const cases: [string[], RegExp][] = [
      [[bad, ...out('bad')], /^shoal: .*bad\.txt is not UTF-8 at byte 12\n$/],
      [[broken, ...out('broken')], /^shoal: .*broken\.jsonl:2 is not JSON \(.*\)\n$/],
      [[join(dir, 'absent.txt'), ...out('absent')], /^shoal: cannot read input .*absent\.txt: ENOENT\n$/],
      [[corpus, ...out('tiny'), '--validation', '0.01'], /^shoal: the input packs into \d+ pieces; a validation split/],
      [[corpus, ...out('small'), '--shard-mib', '0.01'], /argument '0\.01' is invalid\. expected 0\.0625–1024 MiB/],
      [[corpus], /required option '--out <dir>' not specified/],
    ];
    const results = await Promise.all(cases.map(([args]) => pack(args)));
    for (const [i, { status, stdout, stderr }] of results.entries()) {
      const [args, message] = cases[i] as [string[], RegExp];
      expect(stderr, args.join(' ')).toMatch(message);
      expect(status, args.join(' ')).toBe(1);
      expect(stdout).toBe('');
    }
    expect(existsSync(join(dir, 'bad', 'manifest.json'))).toBe(false);

    const skipping = await pack([broken, ...out('broken'), '--skip-bad-lines', '--validation', '0.5', '--json']);
    expect(skipping.status, skipping.stderr).toBe(0);
    expect(JSON.parse(skipping.stdout.trim())).toMatchObject({ documents: 1, skippedLines: 1 });
  });
});

// Tiny packed datasets for the tests, written without the packer: shards of seeded bytes and a
// manifest computed with sha256Hex, in memory or in a temporary folder.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashWords } from '../hash.ts';
import { type DatasetManifest, MANIFEST_FILE, MIN_SHARD_BYTES, sha256Hex } from './manifest.ts';
import { DatasetFetchError, type DatasetSource } from './source.ts';

export interface FixtureShape {
  /** Byte counts of the training shards, then the validation shards. */
  train: readonly number[];
  validation: readonly number[];
  seed?: number;
}

/** Seeded bytes in 'a'…'z' plus newlines, so shards look like text and differ by shard. */
export function seededText(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) {
    const h = hashWords([seed, i]);
    bytes[i] = h % 17 === 0 ? 10 : 97 + (h % 26);
  }
  return bytes;
}

/** The files of a dataset: manifest.json and every shard, by file name. */
export async function fixtureFiles({ train, validation, seed = 1 }: FixtureShape): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  const shards: DatasetManifest['shards'] = [];
  const add = async (split: 'train' | 'validation', sizes: readonly number[]) => {
    for (const [i, size] of sizes.entries()) {
      const file = `${split}-${String(i).padStart(5, '0')}.txt`;
      const bytes = seededText(size, hashWords([seed, split === 'train' ? 0 : 1, i]));
      files.set(file, bytes);
      shards.push({ file, sha256: await sha256Hex(bytes), bytes: size, split });
    }
  };
  await add('train', train);
  await add('validation', validation);
  const bytes = shards.reduce((sum, shard) => sum + shard.bytes, 0);
  const manifest: DatasetManifest = {
    format: 'shoal-dataset',
    version: 1,
    name: `fixture-${seed}`,
    sources: ['fixture'],
    licence: 'CC0-1.0',
    shardBytes: Math.max(MIN_SHARD_BYTES, ...train, ...validation),
    pieceBytes: 64 * 1024,
    validationFraction: 0.05,
    documents: shards.length,
    bytes,
    shards,
  };
  files.set(MANIFEST_FILE, new TextEncoder().encode(JSON.stringify(manifest, null, 2)));
  return files;
}

/** A source over files in memory; `reads` counts each file's reads. */
export function memorySource(
  files: Map<string, Uint8Array>,
  where = 'memory',
): DatasetSource & { reads: Map<string, number> } {
  const reads = new Map<string, number>();
  return {
    where,
    reads,
    async read(file: string): Promise<Uint8Array> {
      reads.set(file, (reads.get(file) ?? 0) + 1);
      const bytes = files.get(file);
      if (!bytes) throw new DatasetFetchError(`${where}/${file} does not exist`, file, 'status');
      return bytes;
    },
  };
}

/** Writes the files into a new temporary folder; `remove` deletes it. */
export async function writeFixture(files: Map<string, Uint8Array>): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-dataset-'));
  for (const [file, bytes] of files) await writeFile(join(dir, file), bytes);
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

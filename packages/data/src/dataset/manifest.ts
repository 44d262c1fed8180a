// A packed dataset (`shoal data pack`): UTF-8 shards of at most `shardBytes` bytes each, every
// shard wholly training or wholly validation, described by a manifest (manifest.json) that
// names each shard's file, SHA-256 and byte count. A room names its dataset by the SHA-256 of
// the manifest's bytes, so everyone trains on the same shards; a shard is used only after its
// bytes hash to what the manifest says. Shared by Node and the browser (WebCrypto, no node:*).

import { z } from 'zod';

/** The manifest's file name inside a dataset folder or under a dataset URL. */
export const MANIFEST_FILE = 'manifest.json';

/** Default largest shard: 32 MiB (a few seconds of a GPU volunteer's steps, one fetch). */
export const DEFAULT_SHARD_BYTES = 32 * 1024 * 1024;

/** Smallest and largest shard sizes `shoal data pack --shard-mib` accepts (bytes). */
export const MIN_SHARD_BYTES = 64 * 1024;
export const MAX_SHARD_BYTES = 1024 * 1024 * 1024;

/**
 * Documents longer than this are cut into pieces of at most this many bytes, each ending at a
 * line break where one exists (else at a space, else at a UTF-8 character boundary). Pieces are
 * the unit of the split: piece j (counting from 0 over the whole input) is validation when
 * j mod period = period − 1, period = round(1 / validationFraction).
 */
export const PIECE_BYTES = 64 * 1024;

export const DEFAULT_DATASET_VALIDATION_FRACTION = 0.05;

/** Between two documents in a shard (pieces of one document are joined as they were cut). */
export const DOCUMENT_SEPARATOR = '\n\n';

const sha256Schema = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 is 64 lowercase hex digits');

export const shardEntrySchema = z.object({
  /** The shard's file, relative to the manifest: [a-z0-9-]+.txt, no folders. */
  file: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}\.txt$/, 'a shard file is a plain name like train-00000.txt'),
  sha256: sha256Schema,
  bytes: z.int().min(1).max(MAX_SHARD_BYTES),
  split: z.enum(['train', 'validation']),
});
export type ShardEntry = z.infer<typeof shardEntrySchema>;

export const datasetManifestSchema = z
  .object({
    format: z.literal('shoal-dataset'),
    version: z.literal(1),
    /** For people: the dataset's name (--name, else the first input's name). */
    name: z.string().min(1).max(200),
    /** The inputs as given (file or folder names, never absolute paths) and their licence as given. */
    sources: z.array(z.string().min(1).max(500)).min(1).max(10_000),
    licence: z.string().min(1).max(500),
    shardBytes: z.int().min(MIN_SHARD_BYTES).max(MAX_SHARD_BYTES),
    pieceBytes: z.int().min(1024).max(MAX_SHARD_BYTES),
    validationFraction: z.number().min(0).max(0.5),
    documents: z.int().min(1),
    /** Σ shards' bytes. */
    bytes: z.int().min(1),
    shards: z.array(shardEntrySchema).min(2).max(1_000_000),
  })
  .superRefine((manifest, context) => {
    const files = new Set<string>();
    let total = 0;
    for (const [i, shard] of manifest.shards.entries()) {
      if (files.has(shard.file)) context.addIssue({ code: 'custom', message: `shard ${i} repeats file ${shard.file}` });
      files.add(shard.file);
      if (shard.bytes > manifest.shardBytes) {
        context.addIssue({ code: 'custom', message: `shard ${shard.file} has ${shard.bytes} bytes, over shardBytes` });
      }
      total += shard.bytes;
    }
    if (total !== manifest.bytes) {
      context.addIssue({
        code: 'custom',
        message: `the shards hold ${total} bytes, the manifest says ${manifest.bytes}`,
      });
    }
    for (const split of ['train', 'validation'] as const) {
      if (!manifest.shards.some((shard) => shard.split === split)) {
        context.addIssue({ code: 'custom', message: `no ${split} shard: a dataset needs both splits` });
      }
    }
  });
export type DatasetManifest = z.infer<typeof datasetManifestSchema>;

/** Lowercase hex SHA-256 of `bytes` (WebCrypto: Node ≥ 20 and browsers' secure contexts). */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A manifest as loaded: parsed, checked, and named by the SHA-256 of its bytes. */
export interface LoadedManifest {
  manifest: DatasetManifest;
  /** SHA-256 of manifest.json's bytes: what a room's config carries. */
  hash: string;
  train: ShardEntry[];
  validation: ShardEntry[];
}

/** Parses and checks manifest.json's bytes; the error names `where` and the first problem. */
export async function parseManifest(bytes: Uint8Array, where: string): Promise<LoadedManifest> {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw new Error(`dataset manifest ${where} is not JSON: ${(error as Error).message}`);
  }
  const parsed = datasetManifestSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.length ? ` at ${issue.path.join('.')}` : '';
    throw new Error(`dataset manifest ${where} is not a Shoal dataset manifest${path}: ${issue?.message ?? 'invalid'}`);
  }
  const manifest = parsed.data;
  return {
    manifest,
    hash: await sha256Hex(bytes),
    train: manifest.shards.filter((shard) => shard.split === 'train'),
    validation: manifest.shards.filter((shard) => shard.split === 'validation'),
  };
}

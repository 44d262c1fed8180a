// `shoal data pack`: the packer of @shoal/data behind a progress bar and a one-line summary.

import { type PackProgress, type PackResult, packDataset } from '@shoal/data';
import cliProgress from 'cli-progress';
import { UsageError } from './usage.ts';

export interface DataPackOptions {
  out: string;
  shardMib: number;
  validation: number;
  textField?: string;
  name?: string;
  licence?: string;
  skipBadLines?: boolean;
  overwrite?: boolean;
  json?: boolean;
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);

export async function dataPackCommand(inputs: string[], options: DataPackOptions): Promise<void> {
  // A redrawn bar for a person at a terminal; nothing for scripts and logs.
  const bar =
    !options.json && process.stderr.isTTY
      ? new cliProgress.SingleBar(
          {
            format: 'packing |{bar}| {read}/{size} MiB | {shards} shards | ETA {eta_formatted}',
            stream: process.stderr,
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  let started = false;
  const onProgress = ({ bytesRead, totalBytes, shards }: PackProgress) => {
    if (bar === null) return;
    const payload = { read: mib(bytesRead), size: mib(totalBytes), shards };
    if (!started) bar.start(Math.max(totalBytes, 1), 0, payload);
    started = true;
    bar.update(Math.min(bytesRead, Math.max(totalBytes, 1)), payload);
  };

  let result: PackResult;
  try {
    result = await packDataset(inputs, {
      outDir: options.out,
      shardBytes: Math.round(options.shardMib * MIB),
      validationFraction: options.validation,
      textField: options.textField,
      name: options.name,
      licence: options.licence,
      skipBadLines: options.skipBadLines,
      overwrite: options.overwrite,
      onProgress,
    });
  } catch (error) {
    // Bad input and full disks alike: one line, no stack trace.
    throw new UsageError((error as Error).message);
  } finally {
    bar?.stop();
  }

  if (options.json) {
    const { shards, bytes, validationShards, manifest, hash, documents, skippedLines } = result;
    console.log(JSON.stringify({ shards, bytes, validationShards, manifest, hash, documents, skippedLines }));
    return;
  }
  const train = result.shards - result.validationShards;
  console.log(
    `packed ${result.documents} documents into ${result.shards} shards (${train} train, ${result.validationShards} validation), ${mib(result.bytes)} MiB`,
  );
  if (result.skippedLines > 0) console.log(`skipped ${result.skippedLines} bad JSONL lines`);
  console.log(`manifest ${result.manifest}`);
  console.log(`sha256 ${result.hash}`);
}

import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { UsageError } from './usage.ts';

/** Owner read/write only: files that hold a room's credentials or its run. */
export const PRIVATE_FILE_MODE = 0o600;

/** Reads a file, or fails with one line naming what it is and why it could not be read. */
export function readInput(path: string, what: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new UsageError(`cannot read ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
}

/** Writes beside the target and renames, so a failure never leaves a partial file. */
export function writeAtomically(path: string, bytes: Uint8Array): void {
  const temporary = `${path}.partial-${process.pid}`;
  writeFileSync(temporary, bytes);
  renameSync(temporary, path);
}

/**
 * Writes each file beside its target (`PATH.partial`, created with `mode` so it is never readable
 * by others, flushed to the disk), then renames them all into place one right after another,
 * without yielding: a process killed at any point leaves the old files or the new ones, never a
 * torn one, and a pair (a room's weights and run state) goes out of step only if the kill lands
 * between two renames, which finishInterruptedWrite then completes. The writes run off the event loop (libuv's pool), so rounds
 * go on meanwhile. The temporary name is fixed, not per process: a write killed midway leaves one
 * stale file, which the next write replaces.
 */
export async function writePrivateFiles(
  files: { path: string; bytes: Uint8Array }[],
  mode = PRIVATE_FILE_MODE,
): Promise<void> {
  for (const { path, bytes } of files) {
    const file = await open(`${path}.partial`, 'w', mode);
    try {
      await file.chmod(mode); // a stale temporary keeps the mode it was created with
      await file.writeFile(bytes);
      await file.datasync();
    } finally {
      await file.close();
    }
  }
  for (const { path } of files) renameSync(`${path}.partial`, path);
}

/**
 * Finishes a writePrivateFiles of `paths` that was killed between its renames (on a loaded
 * machine the window is wider than it looks): every file was written before the first rename, so
 * when the last one's `.partial` is `complete`, the `.partial`s still there are renamed into place,
 * in order, and the set is the newer save again. When it is missing or incomplete (no save was in
 * flight, or one was killed while writing), nothing changes: the old files are a whole save.
 * True when it finished one.
 */
export function finishInterruptedWrite(
  paths: readonly string[],
  complete: (partials: Map<string, Uint8Array>) => boolean,
): boolean {
  const last = paths.at(-1);
  if (last === undefined || !existsSync(`${last}.partial`)) return false;
  // each file as the finished save would have it: its .partial where one is left, else in place
  const files = new Map(
    paths.map((path) => [path, readFileSync(existsSync(`${path}.partial`) ? `${path}.partial` : path)] as const),
  );
  if (!complete(files)) return false;
  for (const path of paths) if (existsSync(`${path}.partial`)) renameSync(`${path}.partial`, path);
  return true;
}

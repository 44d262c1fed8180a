import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { UsageError } from './usage.ts';

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

/**
 * Each part's JSON under $OUT, rewritten as rows arrive: a part stopped at its time budget still
 * leaves what it measured, with `complete: false`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export class PartOutput<T extends object> {
  private readonly started = performance.now();
  readonly path: string;

  constructor(
    out: string,
    readonly part: string,
    private data: T,
  ) {
    mkdirSync(out, { recursive: true });
    this.path = join(out, `${part}.json`);
    this.write(false);
  }

  /** Merges `fields` into the part's data and rewrites the file. */
  update(fields: Partial<T>): void {
    this.data = { ...this.data, ...fields };
    this.write(false);
  }

  finish(fields: Partial<T> = {}): void {
    this.data = { ...this.data, ...fields };
    this.write(true);
  }

  fail(error: unknown): void {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.write(false, message);
  }

  private write(complete: boolean, error?: string): void {
    const seconds = Number(((performance.now() - this.started) / 1000).toFixed(2));
    const body = { part: this.part, complete, seconds, ...(error ? { error } : {}), ...this.data };
    writeFileSync(this.path, `${JSON.stringify(body, null, 2)}\n`);
  }
}

/** A one-line message for a JSON field: the error's message, without its stack. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The precision part's corpus, Moby Dick as text, written beside the bundle by build.ts: the GPU
 * machine has no @stdlib package to read it from.
 */
export const CORPUS_FILE = 'moby-dick.txt';

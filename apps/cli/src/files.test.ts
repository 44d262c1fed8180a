import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { finishInterruptedWrite, writePrivateFiles } from './files.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A pair written as one save, then the next save's files written and `renamed` of them renamed. */
async function killedSave(renamed: number, lastComplete = true) {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-files-'));
  dirs.push(dir);
  const paths = [join(dir, 'weights'), join(dir, 'state')];
  const bytes = (save: number, name: string) => new TextEncoder().encode(`${name} ${save} end`);
  await writePrivateFiles(paths.map((path, i) => ({ path, bytes: bytes(1, `file${i}`) })));
  paths.forEach((path, i) => {
    const next = bytes(2, `file${i}`);
    writeFileSync(`${path}.partial`, i === paths.length - 1 && !lastComplete ? next.subarray(0, 5) : next);
  });
  for (const path of paths.slice(0, renamed)) renameSync(`${path}.partial`, path);
  const read = () => paths.map((path) => new TextDecoder().decode(readFileSync(path)));
  // complete: every file ends as a whole save's does
  const complete = (files: Map<string, Uint8Array>) =>
    [...files.values()].every((b) => new TextDecoder().decode(b).endsWith(' end'));
  return { paths, read, complete };
}

describe('finishInterruptedWrite', () => {
  it('renames what a save killed between its renames left, so the pair is the newer save', async () => {
    const { paths, read, complete } = await killedSave(1);
    expect(read()).toEqual(['file0 2 end', 'file1 1 end']); // out of step
    expect(finishInterruptedWrite(paths, complete)).toBe(true);
    expect(read()).toEqual(['file0 2 end', 'file1 2 end']);
    expect(paths.some((path) => existsSync(`${path}.partial`))).toBe(false);
  });

  it('finishes a save killed after its writes and before any rename', async () => {
    const { paths, read, complete } = await killedSave(0);
    expect(finishInterruptedWrite(paths, complete)).toBe(true);
    expect(read()).toEqual(['file0 2 end', 'file1 2 end']);
  });

  it('leaves the older save when the newer one was killed while writing', async () => {
    const { paths, read, complete } = await killedSave(0, false);
    expect(finishInterruptedWrite(paths, complete)).toBe(false);
    expect(read()).toEqual(['file0 1 end', 'file1 1 end']);
  });

  it('does nothing after a save that finished', async () => {
    const { paths, read, complete } = await killedSave(2);
    expect(finishInterruptedWrite(paths, complete)).toBe(false);
    expect(read()).toEqual(['file0 2 end', 'file1 2 end']);
  });
});

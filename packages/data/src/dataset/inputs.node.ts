// The files `shoal data pack` reads, in a reproducible order: files as named, folders walked in
// sorted path order (hidden names, the output folder and a folder's .json files skipped).

import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { extname, join, relative, resolve, sep } from 'node:path';

export interface InputFile {
  path: string;
  kind: 'text' | 'jsonl';
  size: number;
}

/** The files the inputs name, in order: folders recursed (sorted by path, hidden names and outDir skipped). */
export async function listInputs(inputs: string[], outDir: string): Promise<InputFile[]> {
  const files: InputFile[] = [];
  const add = async (path: string, explicit: boolean) => {
    const extension = extname(path).toLowerCase();
    if (extension === '.json') {
      if (explicit) throw new Error(`${path} is JSON, not JSON Lines: one object per line belongs in a .jsonl file`);
      return; // a folder's .json files are metadata (another dataset's manifest), not text
    }
    const info = await stat(path);
    files.push({ path, kind: extension === '.jsonl' ? 'jsonl' : 'text', size: info.size });
  };
  for (const input of inputs) {
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(input);
    } catch (error) {
      throw new Error(
        `cannot read input ${input}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    if (!info.isDirectory()) {
      await add(input, true);
      continue;
    }
    const found: string[] = [];
    const walk = async (dir: string) => {
      if (resolve(dir) === outDir) return;
      const entries: Dirent[] = await readdir(dir, { withFileTypes: true });
      for (const entry of entries) {
        if (entry.name.startsWith('.')) continue;
        const path = join(dir, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (entry.isFile() || (entry.isSymbolicLink() && (await stat(path)).isFile())) found.push(path);
      }
    };
    await walk(input);
    // Code-unit order of the path below the folder, '/' on every system: the same on every machine.
    const key = (path: string) => relative(input, path).split(sep).join('/');
    found.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    for (const path of found) await add(path, false);
  }
  return files;
}

// A dataset in a local folder, and `datasetSource`: the one spelling the CLI accepts for either.

import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DatasetFetchError, type DatasetSource, urlDatasetSource } from './source.ts';

/** A dataset folder on this machine. */
export function dirDatasetSource(dir: string): DatasetSource {
  const root = resolve(dir);
  return {
    where: root,
    async read(file: string): Promise<Uint8Array> {
      const path = join(root, file);
      try {
        const buffer = await readFile(path);
        return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') {
          throw new DatasetFetchError(`dataset file ${path} does not exist`, file, 'status');
        }
        throw new DatasetFetchError(
          `dataset file ${path} could not be read: ${(error as Error).message}`,
          file,
          'network',
        );
      }
    },
  };
}

/** `http://…` or `https://…` → a URL source; anything else is a folder. */
export function datasetSource(spec: string): DatasetSource {
  return /^https?:\/\//i.test(spec) ? urlDatasetSource(spec) : dirDatasetSource(spec);
}

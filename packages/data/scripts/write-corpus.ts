// Writes the default corpus (Moby Dick, joined as the corpus contract says) to a text file, for
// the web app to serve as /data/moby-dick.txt instead of bundling the book into JavaScript.
//
//   npx tsx packages/data/scripts/write-corpus.ts [OUT]   (default: public/data/moby-dick.txt)

import { resolve } from 'node:path';
import { writeMobyDickText } from '../src/index.ts';

const repoRoot = resolve(import.meta.dirname, '../../..');
const out = process.argv[2] ?? resolve(repoRoot, 'public/data/moby-dick.txt');
const written = writeMobyDickText(out);
console.log(`wrote ${written.path}: ${written.bytes} bytes, fingerprint ${written.fingerprint}`);

/**
 * `npm run docs`: writes what docs/ derives from the code (today: docs/cli.md's table of the run
 * options); program.test.ts fails when the committed text differs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { withRunOptionsMarkdown } from '../apps/cli/src/run-options.ts';

const path = new URL('../docs/cli.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = withRunOptionsMarkdown(before);
if (after === before) console.log('docs/cli.md is up to date');
else {
  writeFileSync(path, after);
  console.log('docs/cli.md: the run options table rewritten');
}

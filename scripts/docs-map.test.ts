/**
 * docs/design.md's "Where things live" map against the tree: every package and app, every e2e
 * spec and every page of docs/ is named in it, and every path it names exists.
 *
 * The map is the fenced block under that heading; a line that starts at column 0 names a path
 * (its first word), an indented line continues the one above.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');

/** The paths the map names, as written (a folder may end in `/`). */
function mapPaths(): string[] {
  const design = readFileSync(join(root, 'docs/design.md'), 'utf8');
  const section = design.split(/^## Where things live$/m)[1];
  if (section === undefined) throw new Error('docs/design.md has no "## Where things live" section');
  const block = section.match(/^```\n([\s\S]*?)^```$/m)?.[1];
  if (block === undefined) throw new Error('docs/design.md: no fenced map under "## Where things live"');
  return block
    .split('\n')
    .filter((line) => /^\S/.test(line))
    .map((line) => line.split(/\s/)[0] as string);
}

/** What must be named: each workspace (a folder with a package.json), e2e spec and docs page. */
function requiredPaths(): string[] {
  const workspaces = ['packages', 'apps'].flatMap((parent) =>
    readdirSync(join(root, parent), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(join(root, parent, entry.name, 'package.json')))
      .map((entry) => `${parent}/${entry.name}`),
  );
  const files = (folder: string, suffix: string) =>
    readdirSync(join(root, folder))
      .filter((name) => name.endsWith(suffix))
      .map((name) => `${folder}/${name}`);
  return [...workspaces, ...files('e2e', '.spec.ts'), ...files('docs', '.md')].sort();
}

describe("docs/design.md's map (Where things live)", () => {
  const named = mapPaths();
  const normalised = new Set(named.map((path) => path.replace(/\/$/, '')));

  it('names every package, app, e2e spec and docs page', () => {
    const missing = requiredPaths().filter((path) => !normalised.has(path));
    expect(missing, `in the tree but not in docs/design.md's map: ${missing.join(', ')}`).toEqual([]);
  });

  it('names only paths that exist', () => {
    const stale = named.filter((path) => !existsSync(join(root, path)));
    expect(stale, `in docs/design.md's map but not in the tree: ${stale.join(', ')}`).toEqual([]);
  });

  it('names each path once', () => {
    const twice = named.filter((path, i) => named.indexOf(path) !== i);
    expect(twice, `named more than once in docs/design.md's map: ${twice.join(', ')}`).toEqual([]);
  });
});

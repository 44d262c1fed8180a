/**
 * The shape of the code, checked: no source file over MAX_FILE_LINES lines (biome's lint checks
 * functions: none over 120 lines outside tests), the packages layered as they are meant to be
 * (the protocol's state machines import neither the apps' shared package nor the simulator), and
 * no import that climbs out of its own package or app into another's files.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const MAX_FILE_LINES = 450;
/** Files of data that may be longer (none today); each with why. */
const LONG_FILES: Record<string, string> = {};

const sources = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((path) => /\.(ts|tsx|mts|mjs|js)$/.test(path) && !path.startsWith('public/'))
  .filter((path) => {
    try {
      readFileSync(join(ROOT, path));
      return true;
    } catch {
      return false; // deleted in the working tree
    }
  });

const isTest = (path: string) => /\.test\.tsx?$/.test(path) || path.startsWith('e2e/');
const importsOf = (text: string) => [...text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1] as string);
/** The package or app a path belongs to (`packages/swarm`), or null for the repo's own folders. */
const unitOf = (path: string) => /^(packages|apps)\/[^/]+/.exec(path)?.[0] ?? null;

describe('the shape of the code', () => {
  it(`has no source file over ${MAX_FILE_LINES} lines`, () => {
    const long = sources
      .filter((path) => !(path in LONG_FILES))
      .map((path) => ({ path, lines: readFileSync(join(ROOT, path), 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_FILE_LINES)
      .map(({ path, lines }) => `${path}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('keeps @shoal/swarm free of the apps’ shared package and the simulator, and @shoal/room of the simulator', () => {
    const forbidden: Record<string, RegExp> = {
      'packages/swarm': /^@shoal\/(room|sim)(\/|$)/,
      'packages/room': /^@shoal\/sim(\/|$)/,
      'packages/protocol': /^@shoal\/(swarm|room|sim)(\/|$)/,
      'packages/diloco': /^@shoal\/(protocol|swarm|room|sim)(\/|$)/,
    };
    const wrong: string[] = [];
    for (const path of sources) {
      const rule = forbidden[unitOf(path) ?? ''];
      // test helpers (test-*.ts) and tests run rooms in the simulator
      if (!rule || isTest(path) || /\/test-[^/]+\.ts$/.test(path)) continue;
      for (const spec of importsOf(readFileSync(join(ROOT, path), 'utf8'))) {
        if (rule.test(spec)) wrong.push(`${path} imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('has no relative import out of its own package or app', () => {
    const wrong: string[] = [];
    for (const path of sources) {
      const unit = unitOf(path);
      if (!unit) continue;
      for (const spec of importsOf(readFileSync(join(ROOT, path), 'utf8'))) {
        if (!spec.startsWith('.')) continue;
        const target = normalize(join(dirname(path), spec));
        if (relative(unit, target).startsWith('..')) wrong.push(`${path} imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});

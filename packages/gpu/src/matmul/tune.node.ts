/**
 * A TileCache in a JSON file (Node), so a GPU server pays for the tile search once per adapter
 * and shape class, not once per process: by default `shoal/matmul-tiles.json` under the OS cache
 * directory (XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS, LOCALAPPDATA on
 * Windows). An unreadable or malformed file, or entry, counts as empty; writes are best-effort.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { MATMUL_KERNEL_NAMES } from './plan.ts';
import type { MatmulConfig, TileCache } from './tune.ts';

export function defaultTileCachePath(): string {
  const base =
    process.env.XDG_CACHE_HOME ||
    (process.platform === 'darwin'
      ? join(homedir(), 'Library', 'Caches')
      : process.platform === 'win32'
        ? (process.env.LOCALAPPDATA ?? join(homedir(), 'AppData', 'Local'))
        : join(homedir(), '.cache'));
  return join(base, 'shoal', 'matmul-tiles.json');
}

function isConfig(value: unknown): value is MatmulConfig {
  const c = value as Partial<MatmulConfig> | null;
  const size = (n: unknown) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 1024;
  return (
    typeof c === 'object' &&
    c !== null &&
    MATMUL_KERNEL_NAMES.includes(c.kernel as MatmulConfig['kernel']) &&
    size(c.workgroupX) &&
    size(c.workgroupY) &&
    size(c.tileK)
  );
}

export function fileTileCache(path = defaultTileCachePath()): TileCache {
  const read = (): Record<string, unknown> => {
    try {
      const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
      return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  };
  return {
    get(key) {
      const entry = read()[key];
      return isConfig(entry) ? entry : undefined;
    },
    set(key, config) {
      try {
        const entries = { ...read(), [key]: config };
        mkdirSync(dirname(path), { recursive: true });
        const temporary = `${path}.${process.pid}.tmp`;
        writeFileSync(temporary, `${JSON.stringify(entries, null, 2)}\n`);
        renameSync(temporary, path); // whole file or nothing, if two processes write at once
      } catch {
        // A read-only or full disk costs the next process a search, nothing more.
      }
    },
  };
}

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultTileCachePath, fileTileCache } from './tune.node.ts';
import type { MatmulConfig } from './tune.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-tiles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const config: MatmulConfig = { kernel: 'register', workgroupX: 16, workgroupY: 16, tileK: 8 };

describe('fileTileCache', () => {
  it('keeps choices across instances (processes) in one JSON file', () => {
    const path = join(dir, 'nested', 'tiles.json');
    fileTileCache(path).set('adapter | 1024x512x2048', config);
    fileTileCache(path).set('adapter | 64x64x64', { ...config, kernel: 'tiled' });
    const again = fileTileCache(path);
    expect(again.get('adapter | 1024x512x2048')).toEqual(config);
    expect(again.get('adapter | 64x64x64')?.kernel).toBe('tiled');
    expect(again.get('other')).toBeUndefined();
    expect(Object.keys(JSON.parse(readFileSync(path, 'utf8')))).toHaveLength(2);
  });

  it('treats a malformed file or entry as empty', () => {
    const path = join(dir, 'bad.json');
    writeFileSync(path, '{ not json');
    expect(fileTileCache(path).get('x')).toBeUndefined();
    writeFileSync(path, JSON.stringify({ x: { kernel: 'fast', workgroupX: 8, workgroupY: 8, tileK: 8 } }));
    expect(fileTileCache(path).get('x')).toBeUndefined();
    fileTileCache(path).set('y', config);
    expect(fileTileCache(path).get('y')).toEqual(config);
  });

  it('lives under the OS cache directory by default', () => {
    expect(defaultTileCachePath()).toMatch(/shoal[/\\]matmul-tiles\.json$/);
  });
});

import { describe, expect, it } from 'vitest';
import { formatMib, manifestPrefix, parseShardBudget } from './DatasetParts.tsx';

describe('a packed dataset on the volunteer page', () => {
  it('shows the cache in MiB and the manifest by its first characters', () => {
    expect(formatMib(2 * 65_536)).toBe('0.13'); // "Shard cache: 0.13 of 0.25 MiB"
    expect(formatMib(4 * 65_536)).toBe('0.25');
    expect(formatMib(128 * 2 ** 20)).toBe('128.0');
    expect(manifestPrefix('3aad08366cfb0123456789')).toBe('3aad08366cfb');
  });

  it('reads the shard budget field: blank is the default, else positive MiB', () => {
    expect(parseShardBudget('')).toEqual({ mib: null });
    expect(parseShardBudget(' 64 ')).toEqual({ mib: 64 });
    expect(parseShardBudget('0.5')).toEqual({ mib: 0.5 });
    expect(parseShardBudget('0').error).toMatch(/positive/);
    expect(parseShardBudget('lots').error).toMatch(/positive/);
  });
});

/**
 * Every attack on the rooms directory, run as `shoal attacks` runs it: each is stopped (measured
 * by the attack itself), noticed, and quick.
 */
import { describe, expect, it } from 'vitest';
import { STORE_ATTACKS } from './store-attacks.ts';

describe('STORE_ATTACKS', () => {
  it('names each attack once, in kebab-case, in the store family', () => {
    const names = STORE_ATTACKS.map((attack) => attack.name);
    expect(new Set(names).size).toBe(names.length);
    for (const attack of STORE_ATTACKS) {
      expect(attack.name).toMatch(/^store-[a-z0-9]+(-[a-z0-9]+)*$/);
      expect(attack.family).toBe('store');
    }
  });

  for (const attack of STORE_ATTACKS) {
    it(`stops ${attack.name}`, { timeout: 10_000 }, async () => {
      const started = performance.now();
      const outcome = await attack.run();
      const ms = performance.now() - started;
      expect(outcome, outcome.detail).toMatchObject({ stopped: true, detected: true });
      expect(outcome.refusals).toBeGreaterThan(0);
      expect(ms).toBeLessThan(5_000);
    });
  }
});

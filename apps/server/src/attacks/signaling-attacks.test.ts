/**
 * Every signaling attack of `shoal attacks` (signaling-attacks.ts) against a fresh real server on
 * loopback: each must be stopped, by measurement, and noticed by the server.
 */
import { describe, expect, it } from 'vitest';
import { SIGNALING_ATTACKS } from './signaling-attacks.ts';

describe('signaling attacks', () => {
  it('names each attack once, in kebab-case', () => {
    const names = SIGNALING_ATTACKS.map((attack) => attack.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-z]+(-[a-z0-9]+)+$/);
    expect(names).toEqual([
      'churn-evict-after-restart',
      'slow-receiver-signal-flood',
      'rekey-on-rejoin',
      'check-token-flood',
      'host-oversized-frames',
    ]);
  });

  for (const attack of SIGNALING_ATTACKS) {
    it(`stops ${attack.name}`, { timeout: 20_000 }, async () => {
      const outcome = await attack.run();
      expect(outcome, outcome.detail).toMatchObject({ stopped: true, detected: true });
      expect(outcome.refusals).toBeGreaterThan(0);
    });
  }
});

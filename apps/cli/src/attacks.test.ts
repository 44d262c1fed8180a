import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

function attacks(args: string[]) {
  const result = spawnSync(process.execPath, [shoal, 'attacks', ...args], { encoding: 'utf8', timeout: 240_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The fields every attack reports, and their types. */
const CONTRACT = {
  name: 'string',
  stopped: 'boolean',
  detected: 'boolean',
  evalLoss: 'number|null',
  cleanEvalLoss: 'number|null',
  roundsCommitted: 'number|null',
  roundsAborted: 'number|null',
  peakBytesHeld: 'number|null',
} as const;

const typeOf = (value: unknown) => (value === null ? 'null' : typeof value);

describe('shoal attacks', () => {
  it('--json ends with {"attacks": [...]}, each with the contract’s fields, the server’s attacks after the room’s', {
    timeout: 240_000,
  }, () => {
    // 4 workers × 46 inner steps of 4×64 tokens: the attack begins at step 25, two rounds before the end
    const { status, stdout, stderr } = attacks([
      ...['--workers', '4', '--tokens', String(4 * 46 * 256), '--json'],
      ...['--only', 'oversized-chunk-announcements,rekey-on-rejoin,forged-abort'],
    ]);
    expect(status, stderr).toBe(0);
    const last = JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
    expect(last.attacks.map((a: { name: string }) => a.name)).toEqual([
      'forged-abort',
      'oversized-chunk-announcements',
      'rekey-on-rejoin',
    ]);
    for (const attack of last.attacks) {
      for (const [field, type] of Object.entries(CONTRACT)) {
        expect(type.split('|'), `${attack.name}.${field}`).toContain(typeOf(attack[field]));
      }
    }
    const [abort, chunks, rekey] = last.attacks;
    // the room run: beside the clean run's loss, rounds committed (at least those before the attack)
    expect(abort.cleanEvalLoss).toBe(last.clean[0].evalLoss);
    expect(abort.cleanEvalLoss).toBeLessThan(Math.log(256));
    expect(abort.roundsCommitted).toBeGreaterThan(0);
    expect(abort.peakBytesHeld).toBeGreaterThanOrEqual(0);
    // the reassembler probe holds bytes and trains nothing
    expect(chunks.peakBytesHeld).toBeGreaterThan(0);
    expect(chunks.evalLoss).toBeNull();
    // the attacks the room cannot hold are named with the tests that cover them
    expect(last.elsewhere.map((e: { name: string }) => e.name)).toContain('sigkill-host-resume');
    expect(stderr).toMatch(/\[3\/3\] oversized-chunk-announcements: (yes|no) stopped, (yes|no) detected/);
    // a server attack: against a real server on loopback, no room figures
    expect(rekey).toMatchObject({ family: 'signaling', stopped: true, detected: true, evalLoss: null });
    expect(stderr).toMatch(/\[server 1\/1\] rekey-on-rejoin: yes stopped, yes detected/);
  });

  it('refuses an unknown attack and a room with no honest worker, in one line', { timeout: 60_000 }, () => {
    const unknown = attacks(['--only', 'forged-abort,no-such-attack']);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr.trim()).toMatch(/^shoal: unknown attack no-such-attack: choose from owner-scales-result, /);
    const allHostile = attacks(['--workers', '3', '--hostile', '3']);
    expect(allHostile.status).toBe(1);
    expect(allHostile.stderr.trim()).toBe('shoal: --hostile 3 leaves no honest worker of 3');
  });
});

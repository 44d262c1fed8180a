/**
 * CI's chaos run: `npm run chaos` for 2 minutes, with 3 workers (a plain `shoal
 * worker`, a witness with delayed links, the hostile one) so that the room's five processes leave
 * room on a 2-core machine: one host kill and resume, worker kills and rejoins, one hostile rejoin.
 * The criteria are the full run's: ≥ 90% of opened rounds commit, no NaN, every replica state a
 * witness held equals the host's committed hash, the checkpoint loads after the kill and at the end,
 * no stretch over a minute without a commit, no process exiting by itself.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadWrtc } from '../apps/cli/src/room.ts';
import { runChaos } from './chaos/harness.ts';
import { chaosTable } from './chaos/report.ts';

describe('the chaos run', () => {
  it('2 minutes over WebRTC on loopback: kills, rejoins, a host resume, a hostile worker', {
    timeout: 360_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    // every process's output, for whoever has to read why it failed
    const logDir = mkdtempSync(join(tmpdir(), 'shoal-chaos-ci-'));
    const figures = await runChaos({
      minutes: 2,
      seed: 1,
      workers: 3,
      cliWorkers: 1,
      innerSteps: 16,
      deadlineMs: 8_000,
      logDir,
    });
    console.log(`${chaosTable(figures)}\nprocess logs: ${logDir}`);
    expect.soft(figures.rounds.commitRatio, 'committed / opened').toBeGreaterThanOrEqual(0.9);
    expect.soft(figures.nan.count, 'NaN').toBe(0);
    expect.soft(figures.hashes.mismatched, figures.hashes.mismatches.join('\n')).toBe(0);
    expect.soft(figures.hashes.checked, 'replica states compared').toBeGreaterThan(0);
    expect.soft(figures.checkpoints.failed, figures.checkpoints.errors.join('\n')).toBe(0);
    expect.soft(figures.chaos.hostKills).toBeGreaterThanOrEqual(1);
    expect.soft(figures.chaos.reclaimed, 'resumes that took the room back').toBe(figures.chaos.hostRestarts);
    expect.soft(figures.chaos.workerKills).toBeGreaterThanOrEqual(1);
    expect.soft(figures.chaos.exits, 'processes that exited by themselves').toEqual([]);
    expect(figures.failures).toEqual([]);
  });
});

/**
 * The chaos figures from made-up process output: rounds counted across host lives (a round open
 * at a kill is lost, one open at the end is not measured), a witness state that differs from the
 * host's commit is caught, a non-finite evaluation counts as NaN, a long stall fails liveness.
 */
import { describe, expect, it } from 'vitest';
import type { CheckpointCheck } from './checkpoint.ts';
import { type ChaosRecord, computeFigures, type HostLife, type WorkerLife } from './figures.ts';
import type { Line } from './processes.ts';

const line = (at: number, json: Record<string, unknown>): Line => ({ at, json, text: JSON.stringify(json) });
const commit = (at: number, round: number, hash: string) =>
  line(at, { event: 'round-committed', fragment: 0, round, participants: 2, hash });
const metrics = (at: number, evalLoss: number | null) => line(at, { event: 'metrics', evalLoss, trainLoss: 3 });
const checkpoint = (at: number, round: number, hash: string) =>
  line(at, { event: 'checkpoint', fragments: [{ round, hash }] });
const okCheck = (round: number, hash: string): CheckpointCheck => ({
  ok: true,
  error: null,
  fragments: [{ round, hash }],
  roomTokens: 0,
  nonFinite: 0,
  hashMismatches: 0,
  evalLoss: 3,
});

function room(witnessLines: Line[], hostMetrics: Line[] = [metrics(1_000, 5), metrics(20_000, 4)]): ChaosRecord {
  // life 0: rounds 1–3 commit, round 4 is open when it is killed at 10 s (checkpoint at round 3)
  const first: HostLife = {
    startedAt: 0,
    endedAt: 10_000,
    ending: 'killed',
    lines: [
      checkpoint(100, 0, 'h0'),
      commit(2_000, 1, 'a1'),
      commit(4_000, 2, 'a2'),
      commit(6_000, 3, 'a3'),
      checkpoint(6_100, 3, 'a3'),
    ],
    stderrTail: '',
  };
  // life 1: resumed at round 3; 4 and 5 commit, 6 aborts, 7 is open at the end
  const second: HostLife = {
    startedAt: 15_000,
    endedAt: 40_000,
    ending: 'stopped',
    lines: [
      line(15_500, { event: 'resumed', fragments: [{ round: 3, hash: 'a3' }], reclaimed: true }),
      commit(17_000, 4, 'b4'),
      commit(19_000, 5, 'b5'),
      line(25_000, { event: 'round-aborted', fragment: 0, round: 6, reason: 'deadline' }),
      ...hostMetrics,
    ],
    stderrTail: '',
  };
  const witness: WorkerLife = {
    name: 'witness-1#0',
    kind: 'witness',
    startedAt: 0,
    endedAt: 40_000,
    ending: 'stopped',
    lines: [
      line(8_000, { event: 'opened', fragment: 0, round: 4, participants: 2 }),
      line(26_000, { event: 'opened', fragment: 0, round: 7, participants: 2 }),
      ...witnessLines,
    ],
    stderrTail: '',
  };
  return {
    minutes: 1,
    seed: 1,
    workers: 2,
    hosts: [first, second],
    workerLives: [witness],
    checkpoints: [
      { at: 10_500, when: 'host-killed', life: 0, check: okCheck(3, 'a3') },
      { at: 40_500, when: 'end', life: 1, check: okCheck(5, 'b5') },
    ],
    actions: { workerKills: 0, workerRestarts: 0, hostKills: 1, hostRestarts: 1, hostileRejoins: 0 },
    reclaimed: 1,
    stopProblems: [],
    measuredUntil: 30_000,
    elapsedMs: 41_000,
  };
}

const adopted = (at: number, round: number, hash: string) => line(at, { event: 'adopted', fragment: 0, round, hash });

describe('computeFigures', () => {
  it('counts rounds per host life: lost at a kill, in flight at the end', () => {
    const figures = computeFigures(
      room([adopted(2_100, 1, 'a1'), adopted(16_000, 3, 'a3'), adopted(17_100, 4, 'b4'), adopted(17_200, 0, 'h0')]),
    );
    expect(figures.rounds.perLife).toEqual([
      { opened: 4, committed: 3, aborted: 0 },
      { opened: 3, committed: 2, aborted: 1 },
    ]);
    expect(figures.rounds).toMatchObject({ opened: 7, committed: 5, aborted: 1, lostInHostKills: 1, inFlightAtEnd: 1 });
    // a joiner's replica starts at the seeded init (round 0), which only the first life named
    expect(figures.hashes).toMatchObject({ checked: 4, agreed: 4, mismatched: 0, resumeMismatches: 0 });
    expect(figures.nan.count).toBe(0);
    expect(figures.checkpoints).toMatchObject({ loads: 2, failed: 0, roundsLostMax: 0 });
    // 5 of 7 is under 90%
    expect(figures.pass).toBe(false);
    expect(figures.failures).toEqual(['71.4% of opened rounds committed (< 90%)']);
  });

  it('catches a replica state that differs from the host life of its moment', () => {
    // round 4 of life 1 is b4; a4 would be a state the witness made up (or an old life's)
    const figures = computeFigures(room([adopted(17_100, 4, 'a4'), adopted(18_000, 9, 'zz')]));
    expect(figures.hashes).toMatchObject({ checked: 1, mismatched: 1, unmatched: 1 });
    expect(figures.failures).toContain("1 replica states differ from the host's committed hash");
  });

  it('counts an evaluation that stops being finite as NaN, and a stall as a liveness failure', () => {
    const figures = computeFigures(room([], [metrics(1_000, 5), metrics(20_000, null)]));
    expect(figures.nan).toMatchObject({ count: 1, hostEvalLoss: 1 });
    // the last commit at 19 s, measured until 30 s: 11 s, under the limit; life 0 → 1 took 11 s
    expect(figures.rounds.longestCommitGap).toEqual({ seconds: 11, fromS: 6 });
    expect(figures.rounds.stalls).toEqual([]);
  });
});

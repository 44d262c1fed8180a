/**
 * The step times a round-open carries (docs/design.md, "Bounded staleness"): what each member's
 * heartbeats claim, never slower than the coordinator measured between them, so a member cannot
 * stretch everyone's merges by claiming to be slow.
 */
import type { Capabilities, HeartbeatMessage } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { type MemberInfo, Roster } from './roster.ts';
import { stepTimes } from './round-plan.ts';

const config = createRunConfig({ preset: 'nano' });
const tokensPerStep = config.train.batchSize * config.train.seqLen;

function member(roster: Roster, peer: string): MemberInfo {
  return roster.add(
    {
      peer,
      role: 'worker',
      status: 'synced',
      capabilities: { tokensPerSecond: 0 } as unknown as Capabilities,
      baseStep: 0,
      scheduleOffset: 0,
    },
    0,
  );
}

function beat(roster: Roster, info: MemberInfo, innerStep: number, tokensPerSecond: number, now: number): void {
  roster.heartbeat(
    info,
    {
      kind: 'heartbeat',
      innerStep,
      tokensSinceContribution: [0],
      loss: null,
      tokensPerSecond,
      bytesSent: 0,
      bytesReceived: 0,
      stalls: 0,
      reachable: [],
    } as unknown as HeartbeatMessage,
    now,
  );
}

describe('a round-open’s step times', () => {
  it('are the claimed step times, bounded by the coordinator’s measure', () => {
    const roster = new Roster('host', 1, () => {});
    const honest = member(roster, 'a');
    const liar = member(roster, 'b');
    const quiet = member(roster, 'c');
    // both step every 100 ms by this clock; b claims a step of about 1,000 s
    for (let t = 0; t <= 1_000; t += 250) {
      beat(roster, honest, t / 100, (tokensPerStep * 1000) / 100, t);
      beat(roster, liar, t / 100, 1e-3, t);
    }
    expect(honest.measuredStepMs).toBeCloseTo(100, 6);
    const times = stepTimes([honest, liar, quiet], config) as number[];
    expect(times[0]).toBeCloseTo(100, 6);
    expect(times[1]).toBeCloseTo(100, 6); // measured, not claimed
    expect(times[2]).toBeCloseTo(100, 6); // claimed nothing: the median of the others'
  });

  it('are absent when nobody has claimed a pace', () => {
    const roster = new Roster('host', 1, () => {});
    expect(stepTimes([member(roster, 'a'), member(roster, 'b')], config)).toBeUndefined();
  });

  it('do not count a paused member’s idle time as its step', () => {
    const roster = new Roster('host', 1, () => {});
    const paused = member(roster, 'a');
    beat(roster, paused, 10, 1000, 0);
    beat(roster, paused, 10, 1000, 5_000); // no step for 5 s
    beat(roster, paused, 11, 1000, 5_100);
    expect(paused.measuredStepMs).toBeCloseTo(100, 6);
  });
});

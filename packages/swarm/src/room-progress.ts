/**
 * The room's progress as the coordinator counts it: its tokens trained and its step (where its
 * workers are on the learning-rate schedule), neither of which ever shows less, not when a worker
 * leaves and not across a host's restart; and each worker's steps for the run state, with those
 * a resumed run state counted kept until each worker comes back.
 */
import { MAX_MEMBERS, type PeerId, type RunConfig } from '@shoal/protocol';
import { type MemberInfo, median, type Roster } from './roster.ts';

/** A worker's steps as the host counted them (the run state keeps them): see roomRunStateSchema. */
export interface MemberSteps {
  /** The worker's own count of its inner steps, as its heartbeat said. */
  innerStep: number;
  /** Its place on the room's schedule. */
  step: number;
}

export class RoomProgress {
  /** Tokens of members that left, and of the run before a resume (the room's total keeps them). */
  private departedTokens: number;
  /** The room's tokens never show less (a resumed host's kept view: carryTokens). */
  private tokenFloor = 0;
  /** The room's step (step()): it never goes back, and a resumed run's starts where it was. */
  private stepFloor = 0;
  /** The workers a resumed run state counted, until each comes back (arrive) or the next save. */
  private readonly resumedSteps = new Map<PeerId, MemberSteps>();

  constructor(
    private readonly config: RunConfig,
    private readonly roster: Roster,
    resume?: { roomTokens: number; members?: Record<PeerId, MemberSteps> },
  ) {
    this.departedTokens = resume?.roomTokens ?? 0;
    for (const [peer, steps] of Object.entries(resume?.members ?? {})) this.resumedSteps.set(peer, steps);
  }

  /** The room's total tokens trained. */
  get roomTokens(): number {
    let total = this.departedTokens;
    for (const info of this.roster.members.values()) total += info.innerStep * this.tokensPerStep;
    return Math.max(total, this.tokenFloor);
  }

  /**
   * Tokens one worker's inner step adds to the room: a batch, or in a pipeline-parallel room a
   * batch over S, since a group's S stages train the same batch.
   */
  get tokensPerStep(): number {
    const { train, pipeline } = this.config;
    return (train.batchSize * train.seqLen) / (pipeline?.stages ?? 1);
  }

  /** The room's tokens never show less than `tokens` (a resumed host's kept view saw them). */
  carryTokens(tokens: number): void {
    if (Number.isFinite(tokens)) this.tokenFloor = Math.max(this.tokenFloor, tokens);
  }

  /** The room's step goes on from at least `step`: true when that raised it. */
  carryStep(step: number): boolean {
    if (!Number.isFinite(step) || step <= this.stepFloor) return false;
    this.stepFloor = step;
    return true;
  }

  /** The median synced worker's inner step, on the room's schedule. */
  get medianStep(): number {
    return median(this.roster.syncedWorkers().map((info) => info.scheduleOffset + info.innerStep));
  }

  /** The room's step: the median synced worker's schedule step, and never less than it was. */
  step(): number {
    this.stepFloor = Math.max(this.stepFloor, this.medianStep);
    return this.stepFloor;
  }

  /**
   * Where a newcomer's steps count from. A worker the resumed run state counted, back with at
   * least the steps it had then: its steps since the save count, and it keeps its place. Anyone
   * else starts at the room's step.
   */
  arrive(peer: PeerId, role: MemberInfo['role'], ownStep: number): Pick<MemberInfo, 'baseStep' | 'scheduleOffset'> {
    const resumed = role === 'worker' ? this.resumedSteps.get(peer) : undefined;
    this.resumedSteps.delete(peer);
    const credited = resumed !== undefined && ownStep >= resumed.innerStep;
    return {
      baseStep: credited ? resumed.innerStep : ownStep,
      scheduleOffset: credited ? resumed.step : this.step(),
    };
  }

  /** A member left: the room's total keeps its tokens. */
  depart(info: MemberInfo): void {
    this.departedTokens += info.innerStep * this.tokensPerStep;
  }

  /**
   * Each worker's steps for the run state: those in the room, then those a resumed run state
   * counted that have not come back yet (they may still), MAX_MEMBERS in all.
   */
  memberSteps(): Record<PeerId, MemberSteps> {
    const steps = new Map<PeerId, MemberSteps>();
    for (const info of this.roster.members.values()) {
      if (info.role !== 'worker') continue;
      steps.set(info.peer, { innerStep: info.baseStep + info.innerStep, step: info.scheduleOffset + info.innerStep });
    }
    for (const [peer, saved] of this.resumedSteps) {
      if (steps.size >= MAX_MEMBERS) break;
      if (!steps.has(peer)) steps.set(peer, saved);
    }
    return Object.fromEntries([...steps].slice(0, MAX_MEMBERS));
  }
}

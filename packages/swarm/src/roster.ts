/**
 * The coordinator's roster: who is in the room, what each member last said of itself (hello,
 * heartbeats, hash reports), and who is benched (docs/design.md, "Rounds in a room of unequal
 * GPUs"). It sends nothing but the roster itself; the coordinator decides when members come,
 * go, and fail their rounds.
 */
import type {
  Capabilities,
  DataLedger,
  HeartbeatMessage,
  PeerId,
  PipelineSlot,
  Member as RosterMember,
  RosterMessage,
} from '@shoal/protocol';

export interface MemberInfo {
  peer: PeerId;
  role: RosterMember['role'];
  status: RosterMember['status'];
  /**
   * Fragments a syncing member was found behind on (its hello held another state): each needs an
   * agreeing hash report before it is synced again. Agreement on one fragment says nothing of the
   * others, and a member named in a round whose base it lacks can only stall it.
   */
  behind?: Set<number>;
  reason: string;
  capabilities: Capabilities;
  innerStep: number;
  tokensSince: number[];
  loss: number | null;
  tokensPerSecond: number;
  bytesSent: number;
  bytesReceived: number;
  stalls: number;
  lastSeen: number;
  /**
   * Its own step count when it said hello: a worker returning to a restarted host counts on from
   * there, and `innerStep` is what it did since (so the room's tokens are not counted twice).
   */
  baseStep: number;
  /**
   * Where the room's schedule stood when it said hello (the room's step; for a worker a resumed
   * run state counted, its own place then): the schedule counts its progress from there, so a
   * newcomer at step 0 does not hold the median, and with it every round, back until it has
   * caught up with the veterans.
   */
  scheduleOffset: number;
  /** The peers it has an open channel to (heartbeats); null until its first heartbeat. */
  reachable: Set<PeerId> | null;
  /** Its contributions that shard owners refused, by reason, as its heartbeats report them. */
  rejected: Record<string, number>;
  /** Its inner step when it was last named for each fragment's round (what its next weight can be). */
  stepAtLastRound: number[];
  /** Rounds it was named for and failed (no contribution, result or hash): each doubles its bench. */
  misses: number;
  /** Excluded from rounds until this many rounds have opened in the room (0: not benched). */
  benchedUntil: number;
  /**
   * Its wall time per inner step as this coordinator measures it (steps between consecutive
   * heartbeats over this clock's time between them, averaged; 0 until it has one): a bound on the
   * step time it claims, so a member cannot pass for slower than it is.
   */
  measuredStepMs: number;
  /** Its step and this clock at its last heartbeat, for measuredStepMs. */
  paceMark: { step: number; at: number } | null;
  /** The rounds whose shards it owns and has not finished, with whom it waits for (its heartbeat's). */
  waitingFor: { fragment: number; round: number; peers: PeerId[] }[];
  /** Its steps at its heartbeats of the last SPEED_WINDOW_MS (and the one before), for stepsPerSecondNow. */
  progress: { step: number; at: number }[];
  /** Per fragment, its last low-rank contribution's error at each rank of the ladder (heartbeats). */
  lowRankErrors: number[][];
}

/** The span a member's speed now is measured over (stepsPerSecondNow). */
export const SPEED_WINDOW_MS = 10_000;

/**
 * A member's inner steps per second now, as this coordinator sees them: the steps its heartbeats
 * showed over the last SPEED_WINDOW_MS or so, up to `now`. A member stalled, paused or silent
 * drops to 0; null while its heartbeats span less than one heartbeat's worth of time.
 */
export function stepsPerSecondNow(info: Pick<MemberInfo, 'progress'>, now: number): number | null {
  const first = info.progress[0];
  const last = info.progress.at(-1);
  if (!first || !last || last === first || now <= first.at) return null;
  return (Math.max(0, last.step - first.step) * 1000) / (now - first.at);
}

/** What a hello tells of a newcomer; the rest of its MemberInfo starts empty. */
export type Newcomer = Pick<
  MemberInfo,
  'peer' | 'role' | 'status' | 'capabilities' | 'baseStep' | 'behind' | 'scheduleOffset'
>;

export const median = (values: number[]) => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
};

export class Roster {
  readonly members = new Map<PeerId, MemberInfo>();
  private epoch = 0;
  /** Rounds opened in the room, all fragments: benches are counted in them. */
  private roundsOpened = 0;

  constructor(
    private readonly self: PeerId,
    /** Fragments of the run: a bench lasts a multiple of one sync of each. */
    private readonly fragmentCount: number,
    /** Sends the roster to every member (it changed). */
    private readonly publish: (roster: RosterMessage) => void,
    /** A member's group and stage in a pipeline-parallel room (none otherwise). */
    private readonly placeOf: (peer: PeerId) => PipelineSlot | null = () => null,
    /** A dataset room's ledger, sent with every roster (none otherwise). */
    private readonly ledgerOf: () => DataLedger | undefined = () => undefined,
  ) {}

  /** The roster message; each one carries a new epoch. */
  message(): RosterMessage {
    const data = this.ledgerOf();
    return {
      kind: 'roster',
      epoch: ++this.epoch,
      coordinator: this.self,
      members: [...this.members.values()].map(({ peer, role, status, reason, capabilities }) => {
        const pipeline = this.placeOf(peer);
        return { peer, role, status, reason, capabilities, ...(pipeline ? { pipeline } : {}) };
      }),
      ...(data ? { data } : {}),
    };
  }

  broadcast(): void {
    this.publish(this.message());
  }

  syncedWorkers(): MemberInfo[] {
    return [...this.members.values()].filter((info) => info.role === 'worker' && info.status === 'synced');
  }

  add(newcomer: Newcomer, now: number): MemberInfo {
    const info: MemberInfo = {
      ...newcomer,
      reason: '',
      innerStep: 0,
      tokensSince: new Array<number>(this.fragmentCount).fill(0),
      loss: null,
      tokensPerSecond: newcomer.capabilities.tokensPerSecond,
      bytesSent: 0,
      bytesReceived: 0,
      stalls: 0,
      lastSeen: now,
      reachable: null,
      rejected: {},
      misses: 0,
      benchedUntil: 0,
      stepAtLastRound: new Array<number>(this.fragmentCount).fill(0),
      measuredStepMs: 0,
      paceMark: null,
      progress: [],
      waitingFor: [],
      lowRankErrors: [],
    };
    this.members.set(info.peer, info);
    return info;
  }

  /** A member's heartbeat: its progress and counters as it reports them. */
  heartbeat(info: MemberInfo, message: HeartbeatMessage, now: number): void {
    info.innerStep = Math.max(0, message.innerStep - info.baseStep);
    info.tokensSince = message.tokensSinceContribution;
    info.loss = message.loss;
    info.tokensPerSecond = message.tokensPerSecond;
    info.bytesSent = message.bytesSent;
    info.bytesReceived = message.bytesReceived;
    info.stalls = message.stalls;
    info.reachable = new Set(message.reachable);
    info.rejected = message.rejectedContributions ?? {};
    info.lowRankErrors = message.lowRankErrors ?? [];
    info.waitingFor = message.waitingFor ?? [];
    info.lastSeen = now;
    const mark = info.paceMark;
    if (mark && message.innerStep > mark.step && now > mark.at) {
      const sample = (now - mark.at) / (message.innerStep - mark.step);
      info.measuredStepMs = info.measuredStepMs > 0 ? (info.measuredStepMs + sample) / 2 : sample;
    }
    info.paceMark = { step: message.innerStep, at: now }; // a heartbeat without steps (paused) restarts it
    info.progress.push({ step: message.innerStep, at: now });
    const recent = info.progress.findIndex((mark) => mark.at >= now - SPEED_WINDOW_MS);
    if (recent > 1) info.progress.splice(0, recent - 1);
  }

  /** A member's status from its hash reports; the roster goes out when it changes. A bench stands. */
  setStatus(peer: PeerId, status: 'synced' | 'diverged'): void {
    const info = this.members.get(peer);
    if (!info || info.role === 'spectator' || info.status === status || info.status === 'excluded') return;
    info.status = status;
    this.broadcast();
  }

  /** Each member's reason for staying out of rounds ('' for none); the roster goes out if any changed. */
  setReasons(reasons: ReadonlyMap<PeerId, string>): void {
    let changed = false;
    for (const [peer, reason] of reasons) {
      const info = this.members.get(peer);
      if (!info || info.reason === reason) continue;
      info.reason = reason;
      changed = true;
    }
    if (changed) this.broadcast();
  }

  /** A round opened: members whose bench is served go back to rounds. */
  roundOpened(): void {
    this.roundsOpened++;
    this.liftBenches();
  }

  /** Members whose bench is served (or all, `early`) go back to rounds; true when any did. */
  liftBenches(early = false): boolean {
    let changed = false;
    for (const info of this.members.values()) {
      if (info.status !== 'excluded' || (info.benchedUntil > this.roundsOpened && !early)) continue;
      info.status = 'synced';
      info.reason = '';
      info.benchedUntil = 0;
      changed = true;
    }
    if (changed) this.broadcast();
    return changed;
  }

  /**
   * A participant failed its round (no contribution, no result, no hash, a wrong aggregate): it
   * sits out the next 2^(misses−1)·P rounds (about one sync of every fragment, doubling), and the
   * roster says why. It stays a member and a replica.
   */
  bench(peer: PeerId, why: string): void {
    const info = this.members.get(peer);
    if (info?.role !== 'worker') return;
    info.misses++;
    const rounds = 2 ** Math.min(info.misses - 1, 10) * this.fragmentCount;
    info.benchedUntil = this.roundsOpened + rounds;
    info.status = 'excluded';
    info.reason = `${why}; out of the next ${rounds} rounds`;
    this.broadcast();
  }
}

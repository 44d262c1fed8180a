/**
 * The referee of an attack run: it knows what every round's aggregate should have been, and
 * checks each state the host's replica takes against it, from outside the swarm.
 *
 * - What the aggregators computed. A send hook that runs before any attack's sees each shard
 *   result as the sender's own code made it (a hostile owner's code is honest; its lie is added
 *   later on the wire), and each contribution as its sender's code made it. A worker's
 *   contribution to its own shard never touches the wire, so a spy on each member's deliveries
 *   (registered before the member's own handlers) sees that one, and which contributions an
 *   aggregator had received when its code emitted the shard's result.
 * - The committed aggregate, as the host adopted it: Δ̄ = m' − μ·m from its momentum before and
 *   after (m' = fround(μ·m + Δ̄), so this is exact to an ulp of m').
 * - Integrity: each committed shard must be one that an aggregator's code emitted (to
 *   INTEGRITY_TOLERANCE); anything else was made up on the way (a scaled, flipped or forged result).
 * - Influence: the honest aggregate of a shard is the run's rule over the honest versions of the
 *   contributions its aggregator had. ‖committed − honest‖ in shares (MAX_INFLUENCE) says how far
 *   the attackers moved the step; beyond MAX_INFLUENCE per attacker the aggregate counts as wrong
 *   (a scaled Δ under the plain mean).
 * - Each change of the host's fragment state must also be a hash the coordinator committed for
 *   its round ('uncommitted' otherwise: a forged commit, a poisoned state transfer), and finite.
 */
import { aggregate, type Codec, type Contribution } from '@shoal/diloco';
import {
  HEADER_OFFSETS,
  MESSAGE_SPECS,
  type Message,
  type PeerId,
  type RoundOpenMessage,
  type RunConfig,
  type WireCodec,
} from '@shoal/protocol';
import { roundCodec } from '@shoal/swarm';

/**
 * Shares by which one attacker may move a committed shard: a share is a median honest
 * contribution's norm times the largest weight share of any participant (what one honest peer
 * can move the mean by). A clipped mean with factor c bounds an attacker to 2c shares (a Δ
 * reversed at the clip: 4 at the design's c = 2); leaving its Δ out moves the step by about 1;
 * under the plain mean a −10·Δ moves it by 11, a 100·Δ by 99.
 */
export const MAX_INFLUENCE = 5;

/** Committed and emitted shards agree to this relative L2 error (the Δ̄ read back from m is exact to an ulp). */
const INTEGRITY_TOLERANCE = 1e-3;

const CONTRIBUTION = MESSAGE_SPECS.contribution.id;
const SHARD_RESULT = MESSAGE_SPECS['shard-result'].id;
const ROUND_OPEN = MESSAGE_SPECS['round-open'].id;

/** What the referee reads of the host's replica (ReplicaState has it). */
export interface WatchedReplica {
  readonly fragments: readonly { round: number; hash: string; theta: Float32Array; momentum: Float32Array }[];
}

interface Snapshot {
  round: number;
  hash: string;
  theta: Float32Array;
  momentum: Float32Array;
}

export interface OracleFindings {
  /** The most shares (MAX_INFLUENCE) a checked shard moved off the honest one by (0: none checked). */
  maxInfluence: number;
  /** Committed shards that no aggregator's code emitted. */
  madeUpShards: number;
  checkedShards: number;
  /** Host states whose hash the coordinator never committed for their round. */
  uncommittedStates: number;
  /** Host state changes that skipped a round or left its base (a fetch): not checked. */
  uncheckedChanges: number;
  /** Non-finite values in the host's θ_global or m. */
  nonFinite: boolean;
  /** The first few findings, in words. */
  notes: string[];
}

export class RoundOracle {
  private readonly opens = new Map<string, RoundOpenMessage>();
  private readonly latest: number[];
  /** `${from}:${p}:${r}:${k}` → the contribution as its sender's code made it. */
  private readonly honest = new Map<string, { weight: number; payload: Uint8Array }>();
  /** `${owner}:${p}:${r}:${k}` → senders whose contribution the owner received, in order. */
  private readonly arrivals = new Map<string, PeerId[]>();
  /** `${p}:${r}:${k}` → the senders the (first) aggregator had when its code emitted the result. */
  private readonly finished = new Map<string, PeerId[]>();
  /** `${p}:${r}:${k}` → every non-empty result payload an aggregator's code emitted. */
  private readonly emitted = new Map<string, Uint8Array[]>();
  private readonly committed = new Map<string, string>();
  private readonly watched: Snapshot[];
  private readonly findings: OracleFindings = {
    maxInfluence: 0,
    madeUpShards: 0,
    checkedShards: 0,
    uncommittedStates: 0,
    uncheckedChanges: 0,
    nonFinite: false,
    notes: [],
  };
  /** The largest message any member sent (bytes): what the run needs a peer to be able to send. */
  largestMessage = 0;
  /** Broadcasts hand the hook the same bytes once per receiver: decode them once. */
  private lastDecoded: Uint8Array | null = null;

  constructor(
    private readonly config: RunConfig,
    private readonly codec: WireCodec,
    private readonly forged: WeakSet<Uint8Array>,
    private readonly host: WatchedReplica,
    private readonly coordinator: PeerId,
  ) {
    this.latest = host.fragments.map(() => 0);
    this.watched = host.fragments.map((f) => snapshot(f));
  }

  roundOpen(p: number, round: number): RoundOpenMessage | undefined {
    return this.opens.get(`${p}:${round}`);
  }

  latestRound(p: number): number {
    return this.latest[p] ?? 0;
  }

  /** The send hook for `peer`, to be registered before any attack's. */
  sendHook(peer: PeerId): (to: PeerId, bytes: Uint8Array) => 'deliver' {
    return (_to, bytes) => {
      this.largestMessage = Math.max(this.largestMessage, bytes.byteLength);
      const kind = bytes[HEADER_OFFSETS.kind];
      if (kind !== CONTRIBUTION && kind !== SHARD_RESULT && kind !== ROUND_OPEN) return 'deliver';
      if (this.forged.has(bytes) || bytes === this.lastDecoded) return 'deliver';
      this.lastDecoded = bytes;
      const decoded = this.codec.decode(bytes);
      if (decoded.ok) this.observeSent(peer, decoded.message);
      return 'deliver';
    };
  }

  /** A message `peer`'s own code sent (not one an attacker made up or changed). */
  observeSent(peer: PeerId, message: Message): void {
    if (message.kind === 'round-open' && peer === this.coordinator) {
      this.opens.set(`${message.fragment}:${message.round}`, message);
      this.latest[message.fragment] = Math.max(this.latestRound(message.fragment), message.round);
    } else if (message.kind === 'contribution') {
      const key = `${peer}:${message.fragment}:${message.round}:${message.shard}`;
      if (!this.honest.has(key)) this.honest.set(key, { weight: message.weight, payload: message.payload.slice() });
    } else if (message.kind === 'shard-result' && message.payload.byteLength > 0) {
      // (an empty payload is a checker's hash, or a result of nothing accepted)
      const shard = `${message.fragment}:${message.round}:${message.shard}`;
      if (!this.finished.has(shard)) this.finished.set(shard, [...(this.arrivals.get(`${peer}:${shard}`) ?? [])]);
      const list = this.emitted.get(shard) ?? [];
      if (list.length < 4) list.push(message.payload.slice());
      this.emitted.set(shard, list);
    }
  }

  /** A contribution delivered to `owner` (called before the owner's own handler sees it). */
  arrival(
    owner: PeerId,
    from: PeerId,
    message: { fragment: number; round: number; shard: number; weight: number; payload: Uint8Array },
  ): void {
    const shard = `${message.fragment}:${message.round}:${message.shard}`;
    if (from === owner && !this.honest.has(`${from}:${shard}`)) {
      this.honest.set(`${from}:${shard}`, { weight: message.weight, payload: message.payload.slice() });
    }
    const list = this.arrivals.get(`${owner}:${shard}`) ?? [];
    if (!list.includes(from)) list.push(from);
    this.arrivals.set(`${owner}:${shard}`, list);
  }

  committedRound(p: number, round: number, hash: string): void {
    this.committed.set(`${p}:${round}`, hash);
  }

  /** Follows the host's replica: call before every clock event (cheap unless a hash changed). */
  poll(): void {
    for (const [p, state] of this.host.fragments.entries()) {
      const before = this.watched[p] as Snapshot;
      if (state.hash === before.hash) continue;
      const after = snapshot(state);
      this.watched[p] = after;
      this.check(p, before, after);
    }
  }

  /** What the oracle found so far (call `poll` first). */
  report(): OracleFindings {
    return { ...this.findings, notes: [...this.findings.notes] };
  }

  private note(text: string): void {
    if (this.findings.notes.length < 8) this.findings.notes.push(text);
  }

  private check(p: number, before: Snapshot, after: Snapshot): void {
    const found = this.findings;
    if (!allFinite(after.theta) || !allFinite(after.momentum)) {
      if (!found.nonFinite)
        this.note(`fragment ${p} round ${after.round}: the host's θ_global holds non-finite values`);
      found.nonFinite = true;
    }
    if (this.committed.get(`${p}:${after.round}`) !== after.hash) {
      found.uncommittedStates++;
      this.note(`fragment ${p}: the host took a state (round ${after.round}) that the coordinator never committed`);
      return;
    }
    const open = this.opens.get(`${p}:${after.round}`);
    if (after.round !== before.round + 1 || open?.baseHash !== before.hash) {
      found.uncheckedChanges++;
      return;
    }
    const mu = this.config.diloco.outerMomentum;
    const codec = roundCodec(open);
    for (const [k, range] of open.shards.entries()) {
      const length = range.end - range.start;
      const committed = new Float64Array(length);
      for (let i = 0; i < length; i++) {
        const at = range.start + i;
        committed[i] = (after.momentum[at] as number) - mu * (before.momentum[at] as number);
      }
      const key = `${p}:${after.round}:${k}`;
      const emitted = (this.emitted.get(key) ?? []).map((payload) => codec.decode(payload, length));
      const honest = this.honestShard(open, k, codec);
      if (emitted.length === 0 && !honest) continue;
      found.checkedShards++;
      if (emitted.length > 0 && !emitted.some((e) => relativeError(committed, e) <= INTEGRITY_TOLERANCE)) {
        found.madeUpShards++;
        if (found.madeUpShards === 1) {
          const off = relativeError(committed, emitted[0] as Float32Array).toPrecision(3);
          this.note(
            `fragment ${p} round ${after.round} shard ${k}: committed a result no aggregator computed (off by ${off}×)`,
          );
        }
      }
      if (!honest) continue;
      // NaN (an overflow) counts as the largest influence there is
      const influence = distance(committed, honest.values) / honest.share;
      const worst = Number.isNaN(influence) ? Number.POSITIVE_INFINITY : influence;
      if (worst > MAX_INFLUENCE && found.maxInfluence <= MAX_INFLUENCE) {
        this.note(
          `fragment ${p} round ${after.round} shard ${k}: the step moved off the honest one by ${worst.toPrecision(3)} shares`,
        );
      }
      found.maxInfluence = Math.max(found.maxInfluence, worst);
    }
  }

  /**
   * Shard k of the round as an honest aggregator would have computed it had nobody lied to it,
   * and one share of it (MAX_INFLUENCE).
   */
  private honestShard(open: RoundOpenMessage, k: number, codec: Codec): { values: Float32Array; share: number } | null {
    const range = open.shards[k];
    const senders = this.finished.get(`${open.fragment}:${open.round}:${k}`);
    if (!range || !senders) return null;
    const length = range.end - range.start;
    const contributions: Contribution[] = [];
    for (const peer of open.participants) {
      const sent = senders.includes(peer) ? this.honest.get(`${peer}:${open.fragment}:${open.round}:${k}`) : undefined;
      if (!sent) continue;
      try {
        contributions.push({
          values: codec.decode(sent.payload, length),
          weight: Math.min(sent.weight, open.maxWeight),
        });
      } catch {
        // an honest sender's bytes always decode; a stranger's need not, and an owner refuses them too
      }
    }
    if (contributions.length === 0) return null;
    const result = aggregate(contributions, this.config.diloco.aggregation, { length });
    if (!result.ok) return null;
    const norms = contributions.map((c) => distance(c.values, new Float32Array(length))).sort((a, b) => a - b);
    const median = norms[Math.floor((norms.length - 1) / 2)] as number;
    const weights = contributions.map((c) => c.weight);
    const largestShare = Math.max(...weights) / weights.reduce((a, b) => a + b, 0);
    if (!(median > 0)) return null;
    return { values: codec.decode(codec.encode(result.values), length), share: median * largestShare };
  }
}

/** ‖a − b‖₂. */
function distance(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += ((a[i] as number) - (b[i] as number)) ** 2;
  return Math.sqrt(sum);
}

/** ‖a − b‖ / ‖b‖ (0 when both are zero). */
function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const norm = distance(b, new Float32Array(b.length));
  const off = distance(a, b);
  return norm > 0 ? off / norm : off > 0 ? Number.POSITIVE_INFINITY : 0;
}

function snapshot(state: { round: number; hash: string; theta: Float32Array; momentum: Float32Array }): Snapshot {
  return { round: state.round, hash: state.hash, theta: state.theta.slice(), momentum: state.momentum.slice() };
}

function allFinite(values: Float32Array): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i] as number)) return false;
  return true;
}

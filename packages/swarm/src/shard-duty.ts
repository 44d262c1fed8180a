/**
 * A member's shard duties (docs/hostile-volunteers.md, "Checked shard owners"): for each shard of
 * a round it was named for, collect the participants' contributions, aggregate them when all are
 * in or at the deadline, and send the result to every replica.
 *
 * - owner: sends the encoded aggregate (the payload every replica applies) and its result hash;
 * - checker: aggregates the same contributions the same way and sends only the result hash, so
 *   replicas apply the owner's payload once the two agree;
 * - referee: the host, when the two disagree or one of them is gone or silent: its result
 *   replaces both (the host is trusted).
 *
 * The result hash is hash(payload ‖ accepted peers): two honest aggregators of the same
 * contributions produce the same bits (owner.ts combines them in round order), and the accepted
 * list binds the verdicts the coordinator reads misses from.
 *
 * Contributions that arrive before their round-open (links differ in latency) wait in a small
 * buffer, but only for the round after the last one opened here, and at most a few per peer: a
 * peer cannot park megabytes here for rounds that may never open.
 *
 * In the simulator a shard's owner and checker are in one process, and given the same
 * contributions (the same bytes the network delivered to both) they aggregate to the same bits:
 * with a RoundMemo (round-memo.ts) the second takes the first's result instead of aggregating
 * again. Its key is everything the collector was given, exactly (`Given`), so an equivocating
 * contributor, a drop or a deadline that one of them saw and the other did not makes them compute
 * apart, as they would in two processes.
 */
import type { Codec, FragmentHasher } from '@shoal/diloco';
import type { ContributionMessage, PeerId, RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { payloadBound } from './config.ts';
import type { Member } from './member.ts';
import { type AddOutcome, ShardCollector, type ShardContribution, type ShardResult } from './owner.ts';
import { codecKey, exactJson, type RoundMemo, type RoundScope } from './round-memo.ts';

export type ShardRole = 'owner' | 'checker' | 'referee';

export interface ShardDutyOptions {
  member: Member;
  hasher: FragmentHasher;
  config: RunConfig;
  /** Every replica a result goes to (the coordinator and every peer up); self is added. */
  replicas(): PeerId[];
  /** Peers known to be gone (said leave): not waited for. */
  departed(): ReadonlySet<PeerId>;
  /** Shares a shard's aggregate between its owner and checker in this process (the simulator). */
  memo?: RoundMemo;
}

export interface FinishedDuty {
  fragment: number;
  round: number;
  shard: number;
  role: ShardRole;
  resultHash: string;
  /** The peers aggregated, in round order. */
  accepted: string[];
}

interface Duty {
  collector: ShardCollector;
  role: ShardRole;
  cancel: () => void;
  /** What its collector was given, where its result may be shared (a checked shard, with a memo). */
  given: Given | null;
}

/**
 * The inputs a collector's result depends on (owner.ts): per participant its first contribution
 * (later ones change nothing: its header's codec and weight, and its bytes), the order in which
 * the refused ones came (the verdicts' order), and who went down (a missing peer's verdict says so).
 */
interface Given {
  first: Map<PeerId, { header: string; payload: Uint8Array }>;
  refused: PeerId[];
  gone: Set<PeerId>;
}

type Early = Pick<ContributionMessage, 'fragment' | 'round' | 'shard' | 'codec' | 'weight' | 'payload'> & {
  from: PeerId;
};

const dutyKey = (fragment: number, round: number, shard: number) => `${fragment}:${round}:${shard}`;

/** Early contributions kept per sender: one per shard it may send here, for two fragments. */
const EARLY_PER_PEER = 4;

/**
 * The result hash: hash(payload ‖ the accepted peers, newline-separated, in round order). With a
 * memo and the shard's round, once per payload's bytes (every replica of the process hashes them).
 */
export function resultHashOf(
  hasher: FragmentHasher,
  payload: Uint8Array,
  accepted: readonly string[],
  shared?: { memo: RoundMemo | null | undefined; scope: RoundScope; shard: number },
): string {
  const peers = accepted.join('\n');
  const hash = () => hasher.hashBytes([payload, new TextEncoder().encode(peers)]);
  if (!shared?.memo) return hash();
  const key = `result-hash ${shared.shard} ${hasher.algorithm} ${peers}`;
  return shared.memo.recall(shared.scope, key, [payload], hash);
}

export class ShardDuties {
  private readonly duties = new Map<string, Duty>();
  private readonly early: Early[] = [];
  /** The newest round opened here, per fragment: early contributions are for the next one only. */
  private readonly latestOpened = new Map<number, number>();
  private readonly finishedListeners: ((duty: FinishedDuty) => void)[] = [];

  constructor(private readonly options: ShardDutyOptions) {}

  /** Calls `listener` with every result this member sends (the host judges its referee results). */
  onFinished(listener: (duty: FinishedDuty) => void): void {
    this.finishedListeners.push(listener);
  }

  /** A round-open seen: contributions for rounds up to the one after it may wait here. */
  noteOpened(fragment: number, round: number): void {
    if (round > (this.latestOpened.get(fragment) ?? 0)) this.latestOpened.set(fragment, round);
  }

  /** Takes on every shard `open` names this member owner or checker of, with the round's codec. */
  takeNamed(open: RoundOpenMessage, codec: Codec): void {
    const { self } = this.options.member;
    for (const [k, shard] of open.shards.entries()) {
      if (shard.owner === self) this.take(open, codec, k, 'owner', open.deadlineMs);
      else if (shard.checker === self) this.take(open, codec, k, 'checker', open.deadlineMs);
    }
  }

  /**
   * Takes on shard k of a round in `role`, decoding with the round's `codec`; deadlineMs from now
   * it sends what it has.
   */
  take(
    open: RoundOpenMessage,
    codec: Codec,
    k: number,
    role: ShardRole,
    deadlineMs: number,
    participants = open.participants,
  ): void {
    const key = dutyKey(open.fragment, open.round, k);
    if (this.duties.has(key)) return;
    this.noteOpened(open.fragment, open.round);
    const shard = open.shards[k] as RoundOpenMessage['shards'][number];
    const collector = new ShardCollector({
      fragment: open.fragment,
      round: open.round,
      shard: k,
      length: shard.end - shard.start,
      codec,
      participants,
      rule: this.options.config.diloco.aggregation,
      maxWeight: open.maxWeight,
      weightCaps: open.weightCaps
        ? new Map(open.participants.map((peer, i) => [peer, open.weightCaps?.[i] as number]))
        : undefined,
      maxMagnitude: payloadBound(this.options.config, open.lowRank !== undefined),
    });
    // A participant already down (a shard taken over after its owner crashed) is not waited for:
    // the peer-down that drops it from collectors came before this one existed.
    const { member } = this.options;
    // owner and checker both aggregate a checked shard; a referee's inputs are its own
    const shared = this.options.memo && shard.checker !== undefined && role !== 'referee';
    const cancel = member.clock.setTimer(deadlineMs, () => this.finish(key, collector));
    const duty: Duty = {
      collector,
      role,
      cancel,
      given: shared ? { first: new Map(), refused: [], gone: new Set() } : null,
    };
    const up = new Set(member.transport.peers());
    const departed = this.options.departed();
    for (const peer of participants) {
      if (peer !== member.self && (!up.has(peer) || departed.has(peer))) this.dropFrom(duty, peer);
    }
    this.duties.set(key, duty);
    for (const entry of this.early.filter(
      (e) => e.fragment === open.fragment && e.round === open.round && e.shard === k,
    )) {
      this.early.splice(this.early.indexOf(entry), 1);
      this.add(duty, entry.from, entry);
    }
    this.maybeFinish(key, collector);
  }

  /** A contribution into a duty's collector, noted among what it was given. */
  private add(duty: Duty, from: PeerId, contribution: ShardContribution): AddOutcome {
    const outcome = duty.collector.add(from, contribution);
    const { given } = duty;
    // a participant's first contribution is the one the collector judged; any later one is a duplicate
    if (given && duty.collector.job.participants.includes(from) && !given.first.has(from)) {
      const { codec, weight, payload } = contribution;
      given.first.set(from, { header: exactJson([codec, weight]), payload });
      if (!outcome.accepted) given.refused.push(from);
    }
    return outcome;
  }

  private dropFrom(duty: Duty, peer: PeerId): void {
    duty.collector.drop(peer);
    duty.given?.gone.add(peer);
  }

  onContribution(from: PeerId, message: ContributionMessage): void {
    const { member } = this.options;
    const { fragment, round, shard } = message;
    const key = dutyKey(fragment, round, shard);
    const duty = this.duties.get(key);
    if (!duty) {
      const latest = this.latestOpened.get(fragment) ?? 0;
      const mine = this.early.filter((e) => e.from === from).length;
      if (round === latest + 1 && mine < EARLY_PER_PEER) this.early.push({ from, ...message });
      else member.refuse(from, 'contribution', round > latest + 1 ? 'future-round' : 'not-owner', key);
      return;
    }
    const outcome = this.add(duty, from, message);
    if (!outcome.accepted) {
      member.rejectBack(from, 'contribution', outcome.reason, outcome.message, { fragment, round, shard });
    }
    this.maybeFinish(key, duty.collector);
  }

  /** A participant that is gone (down or left): no duty waits for it any more. */
  drop(peer: PeerId): void {
    for (let i = this.early.length - 1; i >= 0; i--) if (this.early[i]?.from === peer) this.early.splice(i, 1);
    for (const [key, duty] of this.duties) {
      this.dropFrom(duty, peer);
      this.maybeFinish(key, duty.collector);
    }
  }

  /** Stops every duty of fragment p's `round` (it ended) and early contributions that can no longer count. */
  endRound(fragment: number, round: number): void {
    for (const [key, duty] of this.duties) {
      const job = duty.collector.job;
      if (job.fragment === fragment && job.round <= round) {
        duty.cancel();
        this.duties.delete(key);
      }
    }
    for (let i = this.early.length - 1; i >= 0; i--) {
      const e = this.early[i] as Early;
      if (e.fragment === fragment && e.round <= round) this.early.splice(i, 1);
    }
  }

  /**
   * The rounds of the shards this member owns and has not finished, each with the participants
   * whose contribution it still waits for (its heartbeat tells the host, whose pages name them).
   */
  waitingFor(): { fragment: number; round: number; peers: PeerId[] }[] {
    const rounds = new Map<string, { fragment: number; round: number; peers: Set<PeerId> }>();
    for (const { collector, role } of this.duties.values()) {
      if (role !== 'owner') continue;
      const missing = collector.missing();
      if (missing.length === 0) continue;
      const { fragment, round } = collector.job;
      const key = `${fragment}:${round}`;
      const entry = rounds.get(key) ?? { fragment, round, peers: new Set<PeerId>() };
      for (const peer of missing) entry.peers.add(peer);
      rounds.set(key, entry);
    }
    return [...rounds.values()].map(({ fragment, round, peers }) => ({ fragment, round, peers: [...peers].sort() }));
  }

  /** Stops every duty (the coordinator is gone: no round in flight can commit). */
  clear(): void {
    for (const { cancel } of this.duties.values()) cancel();
    this.duties.clear();
    this.early.length = 0;
  }

  private maybeFinish(key: string, collector: ShardCollector): void {
    if (collector.isComplete()) this.finish(key, collector);
  }

  private finish(key: string, collector: ShardCollector): void {
    const duty = this.duties.get(key);
    if (!duty || duty.collector !== collector) return;
    this.duties.delete(key);
    duty.cancel();
    const result: ShardResult = this.aggregate(duty);
    const { fragment, round, shard, codec } = collector.job;
    const { memo } = this.options;
    const scope = { fragment, round };
    const resultHash = resultHashOf(this.options.hasher, result.payload, result.accepted, { memo, scope, shard });
    const check = duty.role === 'checker';
    const { member } = this.options;
    // A Δ far beyond the others' norm is scaled down, not refused: counted against its sender
    // (once per shard, by the aggregator whose result replicas apply), as the dashboard shows refusals.
    if (duty.role !== 'checker') {
      for (const { peer, ratio } of result.clipped) {
        member.refuse(peer, 'contribution', 'norm-clipped', `${key}: ${ratio.toPrecision(3)}× the median norm`);
      }
    }
    void member.broadcast([...this.options.replicas(), member.self], {
      kind: 'shard-result',
      fragment,
      round,
      shard,
      codec: codec.name,
      verdicts: result.verdicts,
      resultHash,
      ...(check ? { check: true } : {}),
      payload: check ? new Uint8Array(0) : result.payload,
    });
    for (const listener of this.finishedListeners)
      listener({ fragment, round, shard, role: duty.role, resultHash, accepted: result.accepted });
  }

  /** The duty's aggregate: its collector's, or the one its shard's other aggregator made of the same inputs. */
  private aggregate(duty: Duty): ShardResult {
    const { collector, given } = duty;
    const { memo } = this.options;
    if (!given || !memo) return collector.finish();
    const { job } = collector;
    const headers = job.participants.map((p) => given.first.get(p)?.header ?? (given.gone.has(p) ? 'gone' : 'missing'));
    const bytes = job.participants.map((p) => given.first.get(p)?.payload ?? new Uint8Array(0));
    const jobKey = exactJson({ ...job, codec: codecKey(job.codec), weightCaps: job.weightCaps && [...job.weightCaps] });
    const key = `aggregate ${jobKey} ${exactJson(headers)} ${exactJson(given.refused)}`;
    const result = memo.handOff({ fragment: job.fragment, round: job.round }, key, bytes, () => collector.finish());
    collector.release(); // the other aggregator's result was taken: this one's decodes go back unused
    return result;
  }
}

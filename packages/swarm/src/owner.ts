/**
 * A shard owner's side of the collective (docs/design.md, "The collective"): for one shard of
 * one round, collect each participant's encoded Δ shard with its token weight, validate it
 * (its header names the round's codec and it decodes with it, finite values, a positive weight,
 * capped at the round's maximum), aggregate by the run's rule and encode the result once for
 * every replica.
 *
 * Contributions are combined in the round's participant order, whatever order they arrived in,
 * so the result is the same bits on any owner (a reassigned shard included).
 */
import {
  type AggregationRule,
  aggregate,
  type ClippedMeanSuccess,
  type Codec,
  CodecError,
  type Contribution,
  firstOutOfBounds,
  vectorPool,
} from '@shoal/diloco';
import type { ContributionVerdict } from '@shoal/protocol';

export interface ShardJob {
  fragment: number;
  round: number;
  shard: number;
  /** Values in this shard. */
  length: number;
  codec: Codec;
  /** The round's participants, in the round's order: everyone expected to contribute. */
  participants: readonly string[];
  rule: AggregationRule;
  /** Weights above this are capped (weightCapFactor × the median: 2×). */
  maxWeight: number;
  /** Per participant, a further cap: the tokens the coordinator saw it train (round-open's weightCaps). */
  weightCaps?: ReadonlyMap<string, number>;
  /**
   * The largest |value| an honest Δ can hold (contributionBound): beyond it a contribution is
   * refused as 'magnitude', before any aggregation rule sees it. Infinity: no bound.
   */
  maxMagnitude?: number;
}

/** A participant's contribution to one shard, as its message carries it. */
export interface ShardContribution {
  /** The codec its header names: the round's, or it is refused. */
  codec: string;
  weight: number;
  payload: Uint8Array;
}

export type AddOutcome = { accepted: true } | { accepted: false; reason: string; message: string };

export interface ShardResult {
  /** The encoded aggregate; empty when no contribution was accepted. */
  payload: Uint8Array;
  verdicts: ContributionVerdict[];
  /** Sum of the accepted weights (tokens). */
  tokens: number;
  /** The peers whose Δ is in the aggregate, in round order (part of the result's hash). */
  accepted: string[];
  /**
   * Accepted peers whose Δ the rule scaled down for its norm (beyond clipFactor × the median's:
   * clipped-mean, centered-clip), with their norm over the median's. Honest ones rarely are.
   */
  clipped: { peer: string; ratio: number }[];
}

export class ShardCollector {
  private readonly received = new Map<string, { values: Float32Array; weight: number }>();
  private readonly refused = new Map<string, { reason: string; message: string }>();
  private readonly gone = new Set<string>();
  private result: ShardResult | null = null;
  private released = false;

  constructor(readonly job: ShardJob) {}

  /** A participant's contribution. Refusals are final for this round (one contribution each). */
  add(from: string, { codec, weight, payload }: ShardContribution): AddOutcome {
    const refuse = (reason: string, message: string): AddOutcome => {
      if (!this.received.has(from)) this.refused.set(from, { reason, message });
      return { accepted: false, reason, message };
    };
    if (!this.job.participants.includes(from))
      return { accepted: false, reason: 'not-participant', message: `${from} is not in this round` };
    if (this.received.has(from) || this.refused.has(from)) {
      return { accepted: false, reason: 'duplicate', message: `${from} already contributed to this shard` };
    }
    if (!(Number.isSafeInteger(weight) && weight > 0))
      return refuse('weight', `weight ${weight} is not a positive integer`);
    // Bytes of another codec can decode as the round's (int4 and fp4 have the same layout) and
    // would be aggregated as values their sender never meant.
    if (codec !== this.job.codec.name)
      return refuse('codec', `header says ${codec}, the round's codec is ${this.job.codec.name}`);
    let values = vectorPool.take(this.job.length);
    try {
      values = this.job.codec.decode(payload, this.job.length, values);
    } catch (error) {
      vectorPool.give(values);
      if (error instanceof CodecError || error instanceof RangeError) return refuse('codec', error.message);
      throw error;
    }
    const bound = this.job.maxMagnitude ?? Number.POSITIVE_INFINITY;
    // a blockwise codec's scales bound every value: the values need a look only past the bound
    const within = (this.job.codec.decodedBound?.(payload, this.job.length) ?? Number.NaN) <= bound;
    const problem = within ? null : firstOutOfBounds(values, bound);
    if (problem) vectorPool.give(values);
    if (problem?.reason === 'non-finite')
      return refuse('non-finite', `value ${problem.value} at index ${problem.index}`);
    if (problem) return refuse('magnitude', `|${problem.value}| at index ${problem.index} is over the bound ${bound}`);
    const cap = Math.min(this.job.maxWeight, this.job.weightCaps?.get(from) ?? Number.POSITIVE_INFINITY);
    this.received.set(from, { values, weight: Math.min(weight, cap) });
    return { accepted: true };
  }

  /** A participant that went down: not waited for any more. */
  drop(peer: string): void {
    this.gone.add(peer);
  }

  /** Every participant still up has contributed (or been refused). */
  isComplete(): boolean {
    return this.missing().length === 0;
  }

  /** The participants still up whose contribution has not come. */
  missing(): string[] {
    return this.job.participants.filter((p) => !(this.received.has(p) || this.refused.has(p) || this.gone.has(p)));
  }

  /**
   * Aggregates what arrived (call when complete, or at the deadline). Once: the decoded
   * contributions go back to the pool, and a later call gives the first one's result.
   */
  finish(): ShardResult {
    if (this.released) throw new Error('ShardCollector: finish after release (its contributions are gone)');
    this.result ??= this.aggregate();
    return this.result;
  }

  /**
   * Hands the decoded contributions back to the pool without aggregating them: for an aggregator
   * that takes another's result computed from the same bytes (the simulator's RoundMemo). No-op
   * after finish, which hands them back itself.
   */
  release(): void {
    if (this.result || this.released) return;
    this.released = true;
    for (const { values } of this.received.values()) vectorPool.give(values);
  }

  private aggregate(): ShardResult {
    const order = this.job.participants.filter((p) => this.received.has(p));
    const contributions: Contribution[] = order.map((p) => this.received.get(p) as Contribution);
    const verdicts: ContributionVerdict[] = [];
    let payload: Uint8Array = new Uint8Array(0);
    let tokens = 0;
    const accepted: string[] = [];
    const clipped: ShardResult['clipped'] = [];
    const result =
      contributions.length > 0 ? aggregate(contributions, this.job.rule, { length: this.job.length }) : null;
    if (result?.ok) {
      payload = this.job.codec.encode(result.values);
      vectorPool.give(result.values);
      for (const index of result.accepted) {
        const weight = (contributions[index] as Contribution).weight;
        tokens += weight;
        accepted.push(order[index] as string);
        verdicts.push({ peer: order[index] as string, weight, reason: '', message: '' });
      }
      if ('clipped' in result && 'medianNorm' in result) {
        const { medianNorm } = result as ClippedMeanSuccess;
        for (const { index, norm } of (result as ClippedMeanSuccess).clipped) {
          clipped.push({ peer: order[index] as string, ratio: norm / medianNorm });
        }
      }
    }
    for (const rejection of result?.rejected ?? []) {
      verdicts.push({
        peer: order[rejection.index] as string,
        weight: 0,
        reason: rejection.reason,
        message: rejection.message,
      });
    }
    for (const [peer, { reason, message }] of this.refused) verdicts.push({ peer, weight: 0, reason, message });
    for (const peer of this.job.participants) {
      if (!this.received.has(peer) && !this.refused.has(peer)) {
        verdicts.push({
          peer,
          weight: 0,
          reason: 'missing',
          message: this.gone.has(peer) ? 'peer went down' : 'deadline',
        });
      }
    }
    for (const { values } of contributions) vectorPool.give(values);
    return { payload, verdicts, tokens, accepted, clipped };
  }
}

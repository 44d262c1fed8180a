/**
 * How a worker encodes its Δ for a round, and the error feedback it keeps across rounds: dense,
 * with the round's codec and, where the round's codec is the run's, the run's error feedback
 * (what quantising left out goes into the next Δ); low-rank, as factors with their own feedback
 * (what the factors left out), noting the error each rank would have had for the heartbeats (the
 * room's next choice of rank). A fragment's feedback is kept once its round commits and discarded
 * when the round will not.
 */
import {
  type Codec,
  createCodec,
  ErrorFeedback,
  type Fragment,
  FragmentProjection,
  LowRankFeedback,
  lowRankSeed,
} from '@shoal/diloco';
import type { RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { contributionBound, payloadBound } from './config.ts';
import type { ReplicaNode } from './replica-node.ts';

export interface ContributionEncoderOptions {
  config: RunConfig;
  fragments: Fragment[];
  replica: ReplicaNode;
}

export class ContributionEncoder {
  /** Per fragment, error feedback for the run's codec; empty when the run has none. */
  private readonly feedback: ErrorFeedback[];
  /** Per fragment, the low-rank codec's error feedback (local: what its factors left out). */
  private readonly lowRankFeedback: LowRankFeedback[];
  /** Per fragment, its last low-rank contribution's error at each rank of the ladder (heartbeats). */
  readonly lowRankErrors: number[][];

  constructor(private readonly options: ContributionEncoderOptions) {
    const { config, fragments } = options;
    const { lowRank, errorFeedback } = config.diloco;
    // Error feedback is kept for the run's codec (every round's, as the coordinator opens them).
    const runCodec = createCodec(config.diloco.codec, { blockSize: config.diloco.codecBlockSize });
    this.feedback = errorFeedback ? fragments.map((f) => new ErrorFeedback(runCodec, f.size)) : [];
    this.lowRankFeedback = lowRank ? fragments.map((f) => new LowRankFeedback(f.size, errorFeedback)) : [];
    this.lowRankErrors = fragments.map(() => []);
  }

  /** The round's encoding of Δ (its whole fragment, before it is cut into the round's shards). */
  encode(round: { open: RoundOpenMessage; codec: Codec }, delta: Float32Array): Uint8Array {
    if (round.open.lowRank) return this.encodeLowRank(round, delta);
    if (this.options.config.diloco.lowRank) return this.encodeDenseInLowRank(round, delta);
    return this.encodeDense(round.open.fragment, round.codec, delta);
  }

  /** Fragment p's round in flight committed: what its encodings left out is carried on. */
  committed(p: number): void {
    if (this.feedback[p]?.pending) this.feedback[p]?.commit();
    if (this.lowRankFeedback[p]?.pending) this.lowRankFeedback[p]?.commit();
  }

  /** Fragment p's round in flight will not commit: its feedback is discarded. */
  discarded(p: number): void {
    if (this.feedback[p]?.pending) this.feedback[p]?.discard();
    if (this.lowRankFeedback[p]?.pending) this.lowRankFeedback[p]?.discard();
  }

  private encodeDense(p: number, codec: Codec, delta: Float32Array): Uint8Array {
    const feedback = this.feedback[p];
    const sameCodec = feedback?.codec.name === codec.name && feedback.codec.blockSize === codec.blockSize;
    return feedback && sameCodec && !feedback.pending ? feedback.encode(delta) : codec.encode(delta);
  }

  /**
   * A dense round of a low-rank room (a fragment's first, or where no rank meets the target): Δ
   * and the whole low-rank residual go out as they are; the errors each rank would have had, with
   * this round's bases at the room's most rank, go in the heartbeats for the room's next choice.
   */
  private encodeDenseInLowRank(round: { open: RoundOpenMessage; codec: Codec }, delta: Float32Array): Uint8Array {
    const { config, fragments, replica } = this.options;
    const p = round.open.fragment;
    const setting = config.diloco.lowRank as NonNullable<RunConfig['diloco']['lowRank']>;
    this.lowRankFeedback[p] ??= new LowRankFeedback(delta.length, config.diloco.errorFeedback);
    const sent = this.lowRankFeedback[p].flush(delta, contributionBound(config) / 2);
    const spec = { rank: setting.rank, side: round.open.round % 2 === 1 ? 'right' : 'left' } as const;
    const momentum = replica.state.fragment(p).momentum;
    const tensors = (fragments[p] as Fragment).tensors;
    const projection = new FragmentProjection(tensors, momentum, spec, lowRankSeed(p, round.open.round));
    this.lowRankErrors[p] = projection.rungErrors(sent, projection.encode(sent));
    return round.codec.encode(sent);
  }

  /**
   * A low-rank round's payload: Δ (plus what earlier factors left out) projected with the round's
   * shared projection and quantised with its codec, kept within the owners' bound. Notes the
   * errors at each rank for the heartbeats.
   */
  private encodeLowRank(round: { open: RoundOpenMessage; codec: Codec }, delta: Float32Array): Uint8Array {
    const p = round.open.fragment;
    const projection = this.options.replica.state.projection(p, round.open.round);
    if (!projection) throw new Error(`round ${round.open.round} of fragment ${p} is not open on this replica`);
    const { codec } = round;
    const roundTrip = (payload: Float32Array) => codec.decode(codec.encode(payload), payload.length);
    const limit = payloadBound(this.options.config, true) / 2;
    // (a low-rank open in a room whose config says dense, from a host that knows better, is served too)
    this.lowRankFeedback[p] ??= new LowRankFeedback(delta.length, this.options.config.diloco.errorFeedback);
    const { payload, errors } = this.lowRankFeedback[p].encode(delta, projection, roundTrip, limit);
    this.lowRankErrors[p] = errors;
    return codec.encode(payload);
  }
}

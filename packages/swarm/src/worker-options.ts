/**
 * What a worker is built from (its member, its engine, its batches, what it shares with the other
 * workers of its process) and the figures it reports (its rounds' counters among them).
 */
import type { Batch, StageSpec, StageTrainer, Trainer } from '@shoal/model';
import type { Capabilities, PeerId, RunConfig, ShardPosition } from '@shoal/protocol';
import type { Member } from './member.ts';
import type { VectorInterner } from './replica.ts';
import type { RoundMemo } from './round-memo.ts';

export interface WorkerOptions {
  member: Member;
  coordinator: PeerId;
  capabilities: Capabilities;
  /** Builds the engine once the run's config is known (from the welcome). */
  createTrainer(config: RunConfig, params: Float32Array): Promise<Trainer>;
  /**
   * Readies what the run needs besides the engine (its text, the batch stream) in a
   * pipeline-parallel room, where createTrainer is not called: the worker builds its stage itself.
   */
  prepare?(config: RunConfig): Promise<void>;
  /**
   * In a pipeline-parallel room, builds the engine of the stage the coordinator places this worker
   * in (default: the CPU stage).
   */
  createStage?(
    config: RunConfig,
    spec: StageSpec,
    params: Float32Array,
    o: { microBatch: number; slots: number },
  ): Promise<StageTrainer>;
  /**
   * This worker's batches (its own seed of the corpus, or its shards of a dataset: a promise while
   * a shard is still on its way).
   */
  nextBatch(): Batch | Promise<Batch>;
  /** A dataset room: where it stands in the shards it drew from since the last heartbeat. */
  dataPositions?(): ShardPosition[] | undefined;
  /**
   * How long the clock sleeps after each inner step, ms, given the step's measured time: the
   * modelled compute time of a step in the simulator, a rest that keeps a volunteer's engine under
   * its duty cycle, 0 (or omitted) for a worker that trains flat out.
   */
  sleepAfterStepMs?: (measuredStepMs: number) => number;
  /**
   * Steps a WebGPU engine keeps queued while round work runs (step-pipeline.ts; default
   * DEFAULT_PIPELINE_DEPTH); 1 awaits each step's loss. Other engines await every step.
   */
  pipelineDepth?: number;
  /** Shares its replica's vectors with the other replicas of this process (the simulator). */
  vectors?: VectorInterner;
  /** Shares its replica's and its shard duties' work with the others of this process (the simulator). */
  memo?: RoundMemo;
  /**
   * The run's seeded init (initParameters) where the workers of one process share one (the
   * simulator): read, never written. Made here when omitted.
   */
  initialParams?(config: RunConfig): Float32Array;
}

/** The counters a worker's rounds move (part of the worker's metrics). */
export interface RoundCounters {
  /** Inner steps trained (read here: a contribution's step). */
  innerStep: number;
  /** Times the inner loop waited on the network, or a contribution on its fragment's last round. */
  stalls: number;
  contributions: number;
  merges: number;
  /** Contributions scaled down into the owners' bound (contributionBound). */
  clampedContributions: number;
  /** Times θ_local went non-finite and was replaced by θ_global. */
  recoveries: number;
}

export interface WorkerMetrics extends RoundCounters {
  tokens: number;
  loss: number | null;
  /** Tokens of its last inner step over the step's wall time (the sleep after it included). */
  tokensPerSecond: number;
  /** Time spent waiting on the network instead of training (a due merge or a due round), ms. */
  stalledMs: number;
  /** Times it stopped waiting for an overdue round that did not come, and trained on. */
  overdueExcused: number;
}

/**
 * What `shoal simulate`'s engine (simulate.ts) takes and gives for one method's run.
 */
import type { AggregationRule, CodecName } from '@shoal/diloco';
import type { Batch, GptConfig, TrainConfig, Trainer } from '@shoal/model';
import type { CoordinatorEvent } from '@shoal/swarm';
import type { PipelineTiming, SimPipeline } from './index.ts';
import type { MethodName } from './methods.ts';
import type { SharedRounds } from './shared-rounds.ts';
import type { SharedVectors } from './shared-vectors.ts';

/**
 * A simulated run: the room's settings (preset … outerMomentum, seed; each method's RunConfig is
 * what runConfigOf makes of them, with the method's DiLoCo settings over it) and the simulator's
 * own (workers, tokens, the modelled GPU and links, the engine).
 */
export interface SimulateOptions {
  preset: string;
  workers: number;
  /** Sequences per worker per inner step (b). */
  batch: number;
  seqLen?: number;
  lr: number;
  innerSteps: number;
  fragments: number;
  overlap: number;
  alpha: number;
  codec: CodecName;
  /** Outer Nesterov learning rate and momentum (the run options' defaults when omitted). */
  outerLr?: number;
  outerMomentum?: number;
  /** Values per codec scale (the run options' default when omitted). */
  codecBlockSize?: number;
  /** How shard owners combine the Δ (the run config's default when omitted). */
  aggregation?: AggregationRule;
  /** The low-rank codec of the low-rank methods: most rank and error target (DEFAULT_LOW_RANK when omitted). */
  lowRank?: { rank: number; target: number };
  /** Total training tokens per method, across all workers. */
  tokens: number;
  seed: number;
  gpuTflops: number;
  /**
   * The modelled compute time of one inner step, ms (`--step-ms`), instead of the FLOPs at
   * gpuTflops. Each worker's clock sleeps this long after a step.
   */
  stepMs?: number;
  linkMbps: number;
  latencyMs: number;
  /** Model time and bytes without training (no evaluation). */
  dryRun: boolean;
  /**
   * Copy every message at send, as a wire would (SimNetworkOptions.copyOnSend). Default false:
   * nothing modifies a sent message (it is encoded once and decoded into new arrays), and the
   * copies are a fragment's worth per replica per round of an fp32 method. Tests turn it on to
   * check that the results do not depend on it.
   */
  copyMessages?: boolean;
  /**
   * Where the replicas keep one copy of each vector they agree on (θ_global, m, shard results,
   * tentative states: sim/shared-vectors.ts). Default: a store of the run's own; null: none, each
   * replica its own copies (tests check that the results are the same).
   */
  vectors?: SharedVectors | null;
  /**
   * Where the replicas and shard aggregators do each round's work once between them (decoded
   * results, outer steps, aggregates: round-memo.ts). Default: one of the run's own; tests pass one
   * to read what it shared.
   */
  rounds?: SharedRounds;
  /**
   * Each worker a replica of S ≥ 2 stage volunteers (`planPipeline` picks S for a memory cap);
   * absent: one volunteer holds the whole model. Its stages train on the CPU, whatever createTrainer is.
   */
  pipeline?: SimPipeline;
  /** The engine (cpu or webgpu); unused under dryRun. */
  createTrainer(model: GptConfig, train: TrainConfig, params: Float32Array): Promise<Trainer>;
  trainTokens: Uint8Array;
  evalBatches: Batch[];
  onProgress?(tokens: number): void;
  /** The host's coordinator events, with the virtual time (ms): rounds opened, committed, aborted. */
  onEvent?(event: CoordinatorEvent, atMs: number): void;
}

export interface CurvePoint {
  tokens: number;
  simSeconds: number;
  trainLoss: number | null;
}

export interface MethodResult {
  name: MethodName;
  evalLoss: number | null;
  bytesPerWorker: number;
  peakSyncBytes: number;
  simSeconds: number;
  computeUtilization: number;
  curve: CurvePoint[];
  committedRounds: number;
  abortedRounds: number;
  /** The replica's modelled inner step under `pipeline`, else null. */
  pipeline: PipelineTiming | null;
}

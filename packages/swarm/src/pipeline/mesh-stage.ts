/**
 * A worker's engine in a pipeline-parallel room: one stage of its replica group, as a Trainer,
 * so the worker's rounds, merges and heartbeats run unchanged (docs/pipeline.md). Its step is the
 * group's step (group-step.ts) over its link to the group (group-link.ts), which checks whatever
 * a group member sends before anything of it is kept; bad values from the expected neighbour end
 * the step in progress with PipelineInterrupted (nothing is applied: AdamW runs only once every
 * stage's norm is in).
 *
 * This part follows the coordinator's rosters (which stage of which group it holds, and the
 * engine of that stage, built when it is placed and again when it moves) and carries parameters
 * and optimizer state across the Trainer boundary in the global layout: the stage's own range is
 * real, the rest zeros (rounds only ever read and write the stage's fragments).
 */
import {
  type Batch,
  buildLayout,
  buildStageLayout,
  gatherStage,
  type OptimizerState,
  type ParamLayout,
  type StageLayout,
  type StageSpec,
  type StageTrainer,
  scatterStage,
  splitStages,
  type TrainConfig,
  type Trainer,
  tiedValues,
} from '@shoal/model';
import type { PeerId, PipelineConfig, PipelineSlot, RosterMessage, RunConfig } from '@shoal/protocol';
import { GroupLink, type PipeCounters, PipelineInterrupted, type StageMember } from './group-link.ts';
import { GroupStep } from './group-step.ts';

export { type PipeCounters, PipelineInterrupted, type StageMember } from './group-link.ts';

export interface MeshStageOptions {
  member: StageMember;
  config: RunConfig;
  coordinator: PeerId;
  /** Builds the stage's engine (CPU or WebGPU) once the coordinator has placed this worker. */
  createStage(spec: StageSpec, params: Float32Array, o: { microBatch: number; slots: number }): Promise<StageTrainer>;
  /** How long a stage waits for a group member's message before giving the step up, ms. */
  timeoutMs?: number;
  /** The coordinator's latest roster, if one came before this stage was built. */
  roster?: RosterMessage | null;
  /**
   * θ_global now (the worker's replica), for a stage the coordinator moves this worker to: its
   * θ_local there starts from the room's, as a newcomer's would.
   */
  globalParams?: () => Float32Array;
  /** The coordinator placed this worker in `stage` (first, or another than before). */
  onStage?: (stage: number) => void;
}

const DEFAULT_TIMEOUT_MS = 60_000;

export class MeshStageTrainer implements Trainer {
  readonly backend: 'cpu' | 'webgpu' = 'cpu';
  readonly layout: ParamLayout;
  readonly train: TrainConfig;
  /** Its step waits on the network: the worker must not hold a simulated clock still over it. */
  readonly distributed = true;
  readonly counters: PipeCounters = {
    steps: 0,
    interrupted: 0,
    refused: 0,
    stale: 0,
    activationBytesSent: 0,
    waitedMs: 0,
    busyMs: 0,
  };
  private readonly pipeline: PipelineConfig;
  private readonly specs: StageSpec[];
  private readonly link: GroupLink;
  private readonly groupStep: GroupStep;
  /** The stage it was last placed in (its replica follows that stage's fragments). */
  private stageChosen: number | null = null;
  private stage: StageTrainer | null = null;
  private stageLayout: StageLayout | null = null;
  private starting: Promise<void> | null = null;
  /** Parameters before the stage exists (the global layout). */
  private pending: Float32Array;
  private readonly offs: (() => void)[] = [];
  private destroyed = false;
  /** Its stage's engine could not be built (the worker stops with it). */
  private failure: Error | null = null;

  constructor(
    private readonly options: MeshStageOptions,
    params: Float32Array,
  ) {
    const { config, member } = options;
    if (!config.pipeline) throw new Error('a mesh stage needs a run with a pipeline');
    this.pipeline = config.pipeline;
    this.train = config.train;
    this.layout = buildLayout(config.model);
    this.specs = splitStages(config.model.nLayer, this.pipeline.stages);
    this.pending = params.slice();
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const link = new GroupLink({ member, config, timeoutMs, counters: this.counters });
    this.link = link;
    this.groupStep = new GroupStep(link, this.pipeline, this.train.gradClip, member.clock, this.counters);
    this.offs.push(
      member.on('roster', (from, roster) => {
        if (from === options.coordinator) this.onRoster(roster);
      }),
      member.on('pipe', (from, message) => link.onPipe(from, message)),
    );
    member.onPeerDown((peer) => {
      if (link.holds(peer)) link.interrupt(`stage ${link.stageOf(peer)} (${peer}) went down`);
    });
    if (options.roster) this.onRoster(options.roster);
  }

  /** Its place: group, stage, version; null until the coordinator has placed it. */
  get place(): PipelineSlot | null {
    return this.link.place;
  }

  /** The stage it is placed in, or null until the coordinator has placed it. */
  get pipelineStage(): number | null {
    return this.link.place?.stage ?? null;
  }

  /** Payload bytes of the group's messages it holds for later steps (queued or of a newer version). */
  get heldBytes(): number {
    return this.link.heldBytes;
  }

  /** Payload bytes it holds that `peer` sent. */
  heldBytesFrom(peer: PeerId): number {
    return this.link.heldBytesFrom(peer);
  }

  /** Why it cannot step now (no place yet, its group incomplete, its engine starting), or null. */
  get waiting(): string | null {
    if (this.failure) return null; // the next step throws it
    const why = this.link.waiting;
    if (why) return why;
    if (!this.stage) return 'starting its stage';
    return null;
  }

  private onRoster(roster: RosterMessage): void {
    const placement = this.link.read(roster);
    if (!placement) return;
    const { mine } = placement;
    // (against the engine's stage: a worker dropped and placed again passes through no place at all)
    if (mine && this.stageLayout && mine.stage !== this.stageLayout.stage.index) {
      // a new stage (placed again after a link failure or a host restart): its engine is built
      // again, from θ_global, since θ_local of the old stage says nothing of the new one's blocks
      this.link.interrupt('this worker moved to another stage');
      if (this.options.globalParams) this.pending = this.options.globalParams();
      this.stage?.destroy();
      this.stage = null;
      this.stageLayout = null;
    }
    const newStage = mine !== null && mine.stage !== this.stageChosen;
    if (newStage) this.stageChosen = mine.stage;
    if (this.link.moveTo(placement)) this.groupStep.wteDirty = true;
    this.ensureStage();
    if (newStage && mine) this.options.onStage?.(mine.stage);
    this.link.recheckHeld();
  }

  /** Builds the engine of the stage it is placed in, when it has none (or one of another stage). */
  private ensureStage(): void {
    const slot = this.link.place;
    if (!slot || this.stage || this.starting || this.failure) return;
    const index = slot.stage;
    this.starting = this.startStage(index).catch((error: unknown) => {
      this.failure = new Error(`could not build stage ${index}'s engine: ${(error as Error).message}`);
    });
  }

  private async startStage(index: number): Promise<void> {
    let restart = false;
    try {
      const spec = this.specs[index] as StageSpec;
      const layout = buildStageLayout(this.options.config.model, spec);
      const S = this.pipeline.stages;
      const M = this.pipeline.micros;
      const slots = this.pipeline.schedule === 'gpipe' ? M : Math.min(S - index, M);
      const microBatch = this.train.batchSize / M;
      const stage = await this.options.createStage(spec, gatherStage(layout, this.pending), { microBatch, slots });
      if (this.destroyed || this.link.place?.stage !== index) {
        stage.destroy();
        restart = !this.destroyed; // moved again while this one was being built
        return;
      }
      // parameters set while the engine was being built (a sync) replace the ones it started from
      await stage.setParams(gatherStage(layout, this.pending));
      this.stage = stage;
      this.stageLayout = layout;
    } finally {
      this.starting = null;
      if (restart) this.ensureStage();
    }
  }

  /** Stops for good: the step in progress ends, and no other starts. */
  stop(): void {
    this.link.stop();
  }

  async step(batch: Batch, lr: number): Promise<number> {
    if (this.failure) throw this.failure;
    const engine = this.stage;
    const slot = this.link.place;
    const why = this.waiting;
    const layout = this.stageLayout;
    if (why || !engine || !slot || !layout || layout.stage.index !== slot.stage) {
      throw new PipelineInterrupted(why ?? 'its stage is being built');
    }
    try {
      const { loss, step } = await this.groupStep.run({ engine, layout, slot }, batch, lr);
      this.counters.steps++;
      this.link.lastStep = step;
      return loss;
    } catch (error) {
      if (!(error instanceof PipelineInterrupted)) throw error;
      this.counters.interrupted++;
      this.groupStep.wteDirty = true;
      throw error;
    }
  }

  async evaluate(): Promise<number> {
    throw new Error('a pipeline stage cannot evaluate alone: the host evaluates θ_global');
  }

  async getParams(): Promise<Float32Array> {
    if (!this.stage || !this.stageLayout) return this.pending.slice();
    const global = new Float32Array(this.layout.size);
    scatterStage(this.stageLayout, await this.stage.getParams(), global);
    return global;
  }

  async setParams(params: Float32Array): Promise<void> {
    if (params.length !== this.layout.size) {
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    }
    if (!this.stage || !this.stageLayout) {
      this.pending = params.slice();
      return;
    }
    const local = gatherStage(this.stageLayout, params);
    const tied = this.stageLayout.tiedCopy ? tiedValues(this.stageLayout, local) : null;
    // the last stage's wte copy is the first stage's to set (sendWte), not θ_global's
    if (tied) tied.set(tiedValues(this.stageLayout, await this.stage.getParams()) as Float32Array);
    await this.stage.setParams(local);
    this.groupStep.wteDirty = true;
  }

  async getOptimizerState(): Promise<OptimizerState> {
    const m = new Float32Array(this.layout.size);
    const v = new Float32Array(this.layout.size);
    if (!this.stage || !this.stageLayout) return { m, v, step: 0 };
    const state = await this.stage.getOptimizerState();
    scatterStage(this.stageLayout, state.m, m);
    scatterStage(this.stageLayout, state.v, v);
    return { m, v, step: state.step };
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    if (!this.stage || !this.stageLayout) return;
    const { m, v, step } = state;
    await this.stage.setOptimizerState({
      m: gatherStage(this.stageLayout, m),
      v: gatherStage(this.stageLayout, v),
      step,
    });
  }

  destroy(): void {
    this.destroyed = true;
    this.stop();
    for (const off of this.offs) off();
    this.stage?.destroy();
  }
}

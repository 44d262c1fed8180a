/**
 * One step of a replica group, as one of its stages runs it (docs/pipeline.md): micro-batches'
 * activations come from the previous stage and go to the next, their gradients come back, in the
 * run's schedule (1F1B or GPipe); then the first and last stages swap their tied wte gradients,
 * every stage sends the others its Σg², and each applies AdamW with the same clip factor.
 *
 * The group's step numbers come from its first stage; the others adopt them from the first
 * micro-batch's activations. The first stage sends the last the wte it holds at the start of
 * every step where it may have changed (a merge, a new member, an interrupted step), or an empty
 * wte message saying it did not, so the copies never drift.
 */
import {
  type Batch,
  microBatchOf,
  type PipelineSchedule,
  pipelineGradScale,
  type StageLayout,
  type StageTrainer,
  scheduleOrder,
  tiedGradSum,
  tiedValues,
} from '@shoal/model';
import type { PipelineConfig, PipelineSlot } from '@shoal/protocol';
import type { SwarmClock } from '../member.ts';
import { decodePipe, type GroupLink, type PipeCounters } from './group-link.ts';

/** What one group step runs on: the stage's engine and layout, and its place in the group. */
export interface StageAt {
  engine: StageTrainer;
  layout: StageLayout;
  slot: PipelineSlot;
}

export class GroupStep {
  /** The first stage: its wte may differ from the last stage's copy. */
  wteDirty = true;
  /** The first stage's step numbers (never reused). */
  private stepNumber = 0;

  constructor(
    private readonly link: GroupLink,
    private readonly pipeline: PipelineConfig,
    private readonly gradClip: number,
    private readonly clock: SwarmClock,
    private readonly counters: PipeCounters,
  ) {}

  /** The group's step on `batch` at learning rate `lr`: the group's loss (the last stage's) and its step number. */
  async run(at: StageAt, batch: Batch, lr: number): Promise<{ loss: number; step: number }> {
    const S = this.pipeline.stages;
    const M = this.pipeline.micros;
    const s = at.slot.stage;
    this.link.beginStep(at.slot.version);
    const { loss, step } = await this.microBatches(at, batch, s === 0 ? ++this.stepNumber : null);
    if (S > 1 && (s === 0 || s === S - 1)) await this.swapTied(at.engine, s, step);
    const own = await this.busy(() => at.engine.gradSumSquares());
    const meanLoss = s === S - 1 ? loss / M : Number.NaN;
    const { total, groupLoss } = await this.exchangeNorms(s, step, own, meanLoss);
    await this.busy(() => at.engine.update(lr, pipelineGradScale(total, M, this.gradClip)));
    return { loss: groupLoss, step };
  }

  /**
   * The schedule's forwards and backwards of this stage; `first` is the step number where this
   * is the first stage (the others adopt the first activations'). The sum of the last stage's
   * micro-batch losses (0 elsewhere), and the step number.
   */
  private async microBatches(at: StageAt, batch: Batch, first: number | null): Promise<{ loss: number; step: number }> {
    const { engine: stage, layout } = at;
    const S = this.pipeline.stages;
    const M = this.pipeline.micros;
    const s = at.slot.stage;
    const dtype = this.pipeline.activations;
    const slots = stage.slots;
    let step = first;
    let loss = 0;
    let backwards = 0;
    const targets = new Map<number, Int32Array>();
    for (const op of scheduleOrder(this.pipeline.schedule as PipelineSchedule, S, M)[s] ?? []) {
      const m = op.micro;
      if (op.kind === 'F') {
        let input: Int32Array | Float32Array;
        let micro: Batch | null = null;
        if (s === 0) {
          micro = microBatchOf(batch, m, M);
          input = micro.inputs;
          if (m === 0) await this.sendWte(stage, layout, step as number);
        } else {
          const message = await this.waited(this.link.take('act', s - 1, step, m));
          step ??= message.step;
          const decoded = decodePipe(message);
          input = decoded.values;
          targets.set(m, decoded.targets as Int32Array);
          if (s === S - 1 && m === 0) await this.receiveWte(stage, layout, step);
        }
        const y = micro ? micro.targets : (targets.get(m) as Int32Array);
        const out = await this.busy(() => stage.forward(m % slots, input, s === S - 1 ? y : null));
        if (typeof out === 'number') loss += out;
        else this.link.sendValues(s + 1, 'act', step as number, m, out, dtype, y);
      } else {
        const d = s === S - 1 ? null : decodePipe(await this.waited(this.link.take('grad', s + 1, step, m))).values;
        const dInput = await this.busy(() => stage.backward(m % slots, d, backwards++ > 0));
        if (dInput) this.link.sendValues(s - 1, 'grad', step as number, m, dInput, dtype);
      }
    }
    return { loss, step: step as number };
  }

  /** The first and last stages: each sends the other its tied wte gradient, and both set their sum. */
  private async swapTied(stage: StageTrainer, s: number, k: number): Promise<void> {
    const S = this.pipeline.stages;
    const other = s === 0 ? S - 1 : 0;
    const mine = (await this.busy(() => stage.tiedGrad())) as Float32Array;
    this.link.sendValues(other, 'tied', k, 0, mine, 'f32');
    const theirs = decodePipe(await this.waited(this.link.take('tied', other, k, 0))).values;
    const sum = s === 0 ? tiedGradSum(mine, theirs) : tiedGradSum(theirs, mine);
    await this.busy(() => stage.setTiedGrad(sum));
  }

  /**
   * Sends every other stage this one's Σg² (and the last stage's mean loss), and adds up theirs:
   * the group's Σg², and its loss.
   */
  private async exchangeNorms(
    s: number,
    k: number,
    own: number,
    meanLoss: number,
  ): Promise<{ total: number; groupLoss: number }> {
    const S = this.pipeline.stages;
    for (let t = 0; t < S; t++) {
      if (t === s) continue;
      this.link.send(t, {
        what: 'norm',
        step: k,
        micro: 0,
        dtype: 'f32',
        values: 0,
        targets: 0,
        sumSquares: own,
        ...(Number.isFinite(meanLoss) ? { loss: meanLoss } : {}),
        payload: new Uint8Array(0),
      });
    }
    let total = 0;
    let groupLoss = meanLoss;
    for (let t = 0; t < S; t++) {
      if (t === s) {
        total += own;
        continue;
      }
      const norm = await this.waited(this.link.take('norm', t, k, 0));
      total += norm.sumSquares ?? 0;
      if (t === S - 1 && norm.loss !== undefined) groupLoss = norm.loss;
    }
    return { total, groupLoss };
  }

  /** The first stage, at a step's start: its wte to the last stage when it may have changed. */
  private async sendWte(stage: StageTrainer, layout: StageLayout, step: number): Promise<void> {
    const S = this.pipeline.stages;
    if (S < 2) return;
    const dirty = this.wteDirty;
    this.wteDirty = false;
    const empty = { what: 'wte' as const, step, micro: 0, dtype: 'f32' as const, targets: 0 };
    if (!dirty) {
      this.link.send(S - 1, { ...empty, values: 0, payload: new Uint8Array(0) });
      return;
    }
    const local = await this.busy(() => stage.getParams());
    this.link.sendValues(S - 1, 'wte', step, 0, tiedValues(layout, local) as Float32Array, 'f32');
  }

  /** The last stage, at a step's start: the first stage's wte into its copy, when it sent one. */
  private async receiveWte(stage: StageTrainer, layout: StageLayout, step: number): Promise<void> {
    const message = await this.waited(this.link.take('wte', 0, step, 0));
    if (message.values === 0) return;
    const wte = decodePipe(message).values;
    await this.busy(async () => {
      const local = await stage.getParams();
      (tiedValues(layout, local) as Float32Array).set(wte);
      await stage.setParams(local);
    });
  }

  /** Runs the stage's work, timed as busy (and held on a simulated clock). */
  private async busy<T>(work: () => Promise<T>): Promise<T> {
    const started = this.clock.now();
    const result = await this.clock.track(work());
    this.counters.busyMs += this.clock.now() - started;
    return result;
  }

  private async waited<T>(message: Promise<T>): Promise<T> {
    const started = this.clock.now();
    try {
      return await message;
    } finally {
      this.counters.waitedMs += this.clock.now() - started;
    }
  }
}

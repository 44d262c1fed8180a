/**
 * The room figures every page shows, defined once for the dashboard, the watch page and
 * `shoal host` alike: a pipeline worker's place, the replica groups (derived from members'
 * places, so the dashboard, from the coordinator, and a volunteer, from its roster, show the same
 * table) and a pipeline room's section, the room's schedule step,
 * the validation loss's trend, each fragment's next round and its estimated time, the bytes a
 * ring all-reduce would send, and the wire figure (the codec and each fragment's rank, in words).
 */

import type { StageSpec } from '@shoal/model';
import type {
  PeerId,
  PipelineSlot,
  RoomViewEvalTrend,
  RoomViewGroup,
  RoomViewNextRound,
  RoomViewPipeline,
  RoomViewPlace,
  RunConfig,
} from '@shoal/protocol';

/** A slot with the blocks its stage holds (`split`: splitStages of the run). */
export function placeOf(slot: PipelineSlot, split: readonly StageSpec[]): RoomViewPlace {
  const spec = split[slot.stage];
  if (!spec) throw new RangeError(`stage ${slot.stage} of a ${split.length}-stage pipeline`);
  return { ...slot, firstBlock: spec.firstBlock, endBlock: spec.endBlock };
}

/**
 * The replica groups of a room of `stages` stages from its members' places (the coordinator's
 * slots, or a roster's `pipeline` fields): per group, who holds each stage, lowest id first. A
 * member whose place names an older version of its group than another member's is left out, as
 * its stages would (it is being moved).
 */
export function pipelineGroupsOf(
  members: Iterable<{ peer: PeerId; pipeline?: PipelineSlot | null }>,
  stages: number,
): RoomViewGroup[] {
  const placed = [...members].flatMap(({ peer, pipeline }) => (pipeline ? [{ peer, slot: pipeline }] : []));
  const versions = new Map<number, number>();
  for (const { slot } of placed) versions.set(slot.group, Math.max(versions.get(slot.group) ?? 0, slot.version));
  return [...versions]
    .sort(([a], [b]) => a - b)
    .map(([id, version]) => {
      const members: (PeerId | null)[] = new Array(stages).fill(null);
      for (const { peer, slot } of placed) {
        if (slot.group === id && slot.version === version && slot.stage < stages) members[slot.stage] = peer;
      }
      const waitingFor = members.flatMap((peer, stage) => (peer === null ? [stage] : []));
      return { id, version, members, complete: waitingFor.length === 0, waitingFor };
    });
}

/**
 * A pipeline room's section of the view: the run's settings (`pipeline`), its split (splitStages)
 * with each stage's memory (`stageBytes`), the groups of the workers' places (pipelineGroupsOf),
 * and the workers without a place.
 */
export function pipelineViewOf(
  pipeline: NonNullable<RunConfig['pipeline']>,
  split: readonly StageSpec[],
  stageBytes: readonly number[],
  places: readonly { peer: PeerId; pipeline: PipelineSlot | null }[],
): RoomViewPipeline {
  return {
    ...pipeline,
    split: split.map((spec) => ({
      stage: spec.index,
      firstBlock: spec.firstBlock,
      endBlock: spec.endBlock,
      embeds: spec.embeds,
      head: spec.head,
      memoryBytes: stageBytes[spec.index] ?? 0,
    })),
    groups: pipelineGroupsOf(places, pipeline.stages),
    unplaced: places.filter((p) => p.pipeline === null).map((p) => p.peer),
  };
}

/**
 * Inner steps of the whole room: its tokens ÷ tokens per step. This is NOT the room's place on the
 * learning-rate schedule: each worker runs the schedule on its own inner steps, so with M workers
 * this grows M times as fast. It sizes a checkpoint (how much training went into it).
 */
export function scheduleStep(config: RunConfig, roomTokens: number): number {
  const { batchSize, seqLen } = config.train;
  return Math.floor(roomTokens / (batchSize * seqLen));
}

/** Evaluations in a row above the best that make a rising validation loss, and by how much (1%). */
export const RISING_EVALS = 3;
export const RISING_MARGIN = 0.01;

/** One evaluation of θ_global: its loss and the room's step. */
export interface Evaluation {
  loss: number;
  step: number;
}

/**
 * The validation loss's trend from the best evaluation so far and the latest ones (newest last,
 * at least RISING_EVALS of them kept): rising when the last RISING_EVALS are each above the best
 * by more than RISING_MARGIN (the model may be overfitting its text), once the room has trained
 * on as many tokens as its text holds (`pastOnePass`): before that a rise is an early evaluation's
 * noise, not overfitting. Null before any evaluation.
 */
export function evalTrendOf(
  best: Evaluation | null,
  recent: readonly Evaluation[],
  pastOnePass = true,
): RoomViewEvalTrend | null {
  const latest = recent.at(-1);
  if (!best || !latest) return null;
  const last = recent.slice(-RISING_EVALS);
  const rising =
    pastOnePass && last.length === RISING_EVALS && last.every((e) => e.loss > best.loss * (1 + RISING_MARGIN));
  return { best: best.loss, bestStep: best.step, latest: latest.loss, rising };
}

/**
 * The host's validation losses of θ_global: the latest (null: none yet, or not finite), the best
 * evaluation so far (`best`: a resumed run's) and the latest ones, for evalTrendOf.
 */
export class EvalLosses {
  latest: number | null = null;
  private recent: Evaluation[] = [];

  constructor(private best: Evaluation | null) {}

  /** A loss, at the room's step now (`step`, read only for a finite loss). */
  record(loss: number | null, step: () => number): void {
    this.latest = loss !== null && Number.isFinite(loss) ? loss : null;
    if (this.latest === null) return;
    const evaluation = { loss: this.latest, step: step() };
    if (!this.best || evaluation.loss < this.best.loss) this.best = evaluation;
    this.recent = [...this.recent, evaluation].slice(-RISING_EVALS);
  }

  /** The trend (evalTrendOf); `pastOnePass`: the room has trained on as many tokens as its text holds. */
  trend(pastOnePass: boolean): RoomViewEvalTrend | null {
    return evalTrendOf(this.best, this.recent, pastOnePass);
  }
}

/**
 * A fragment's countdown: the room's steps to its next round's opening, and that many step times
 * (null while no speed is known). An open round, or one already due, is 0 steps away.
 */
export function nextRoundOf(
  next: { fragment: number; round: number; open: boolean; atStep: number },
  roomStep: number,
  stepMs: number | null,
): RoomViewNextRound {
  const steps = next.open ? 0 : Math.max(0, next.atStep - roomStep);
  return {
    fragment: next.fragment,
    round: next.round,
    open: next.open,
    steps,
    etaMs: stepMs === null ? null : steps * stepMs,
  };
}

/**
 * Bytes a ring all-reduce of `values` fp32 numbers among n peers sends in all: each peer sends
 * 2(n − 1)/n of the vector (reduce-scatter, then all-gather), n peers together 2(n − 1)·values·4.
 */
export function ringAllReduceBytes(values: number, n: number): number {
  return n < 2 ? 0 : 2 * (n - 1) * values * 4;
}

/**
 * How a room's rounds travel, in words: 'fp4 (dense)'; 'fp4, low-rank r 8' (a fixed rank);
 * 'fp4, low-rank r 8 / 4 (adaptive, ≤ 8)' (each fragment's rank, shown once when they agree;
 * 'dense' for a fragment whose latest round was dense (rank 0), '–' for one with no round yet);
 * ' · one-step delay' added under overlapRounds 1.
 */
export function wireLabel(codec: string, ranks: readonly (number | null)[], diloco: RunConfig['diloco']): string {
  const { lowRank, overlapRounds } = diloco;
  let text = `${codec} (dense)`;
  if (lowRank) {
    const shown = new Set(ranks).size === 1 ? ranks.slice(0, 1) : ranks;
    const word = (rank: number | null) => (rank === null ? '–' : rank === 0 ? 'dense' : String(rank));
    const ranksText = ranks.every((rank) => rank === null) ? '' : ` r ${shown.map(word).join(' / ')}`;
    const rule = lowRank.target > 0 ? ` (adaptive, ≤ ${lowRank.rank})` : '';
    text = `${codec}, low-rank${ranksText}${rule}`;
  }
  return overlapRounds === 1 ? `${text} · one-step delay` : text;
}

/** Text fields of the view are at most 500 characters (a long "no channel to …" reason is cut). */
export const clipViewText = (text: string) => (text.length > 500 ? `${text.slice(0, 499)}…` : text);

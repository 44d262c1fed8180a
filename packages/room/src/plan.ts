/**
 * The planner behind `shoal plan` and the host form's Recommend (docs/plan.md): from the model,
 * the expected volunteers M, the token budget D and each volunteer's throughput and link, the
 * run options to start a room with.
 *
 * - Inner lr γ and global batch B from the joint fits of the DiLoCo scaling laws (arXiv
 *   2503.09799, Table 10), f(N, M) = A·N^α·M^β; B is in sequences of 2048 tokens.
 * - Outer lr η from the paper's best-η heat-map (constant in N, growing with M) and the direction
 *   of its H sweep (η grows with H).
 * - H, P, τ and codec from the wall-clock model (plan-schedule.ts): compute 6·N·D over the
 *   volunteers' FLOP/s (here per inner step, as `shoal simulate` models it); communication per
 *   round from Shoal's own byte count (round-bytes.ts). A worker keeps training τ steps after contributing and blocks if
 *   the round has not committed by then, so a configuration keeps the GPUs ≥ 95% busy when one
 *   round fits in τ steps and the uplink is free between rounds.
 * - Where no H reaches that with fp4, the low-rank codec (docs/lowrank.md): fp4 factors of rank
 *   DEFAULT_LOW_RANK (the default target, 0, keeps it), each fragment's first round dense.
 *
 * Pure (no I/O, no node modules): the browser imports it as @shoal/room/plan.
 */
import { DEFAULT_LOW_RANK } from '@shoal/diloco';
import { buildLayout, type GptConfig, presetConfig, trainingStepFlops } from '@shoal/model';
import { z } from 'zod';
import { clamp, type ScheduleSearch, searchSchedule, TARGET_UTILIZATION } from './plan-schedule.ts';
import { ROOM_MODEL_DEFAULTS } from './room-model-defaults.ts';
import { RUN_OPTION_DEFAULTS, RUN_OPTIONS, type RunOptions, runConfigOf } from './run-options.ts';

export { TARGET_UTILIZATION } from './plan-schedule.ts';

/** A power law in N (parameters) and M (replicas): A·N^α·M^β. */
interface JointFit {
  A: number;
  alpha: number;
  beta: number;
}

/** SL Table 10, fitted on N = 35M … 2.4B and M = 1, 2, 4, 8 (C4, 32k vocabulary, D = 20N). */
export const JOINT_FITS = {
  /** C4 validation loss. */
  loss: { A: 19.226, alpha: -0.0985, beta: 0.0116 },
  /** Peak inner AdamW learning rate γ. */
  innerLr: { A: 22256, alpha: -0.8827, beta: 0.2929 },
  /** Global batch B, in sequences of PAPER_SEQ_LEN tokens (docs/plan.md, "Units"). */
  globalBatch: { A: 0.00709, alpha: 0.4695, beta: 0.3399 },
} as const satisfies Record<string, JointFit>;

/** The sizes the fits were swept on (SL Table 4); outside them a fit extrapolates. */
export const FIT_PARAMS = { min: 35e6, max: 2.4e9 } as const;
/** The largest M the fits saw. */
export const FIT_WORKERS_MAX = 8;
/** The paper's sequence length: the unit of B. */
export const PAPER_SEQ_LEN = 2048;

/** Below the fit's range the γ fit grows past any sane lr (docs/plan.md): γ is held at its 35M value and at most this. */
const EXTRAPOLATED_LR_CEILING = 0.01;
/** Below the fit's range, the batch per volunteer is rounded down if need be to leave at least this many inner steps. */
const MIN_STEPS = 500;
/**
 * Best outer lr η at H = 30 per M, for N ≥ 335M where it no longer moves with N (SL Fig. 7, as
 * decoded from the figure's text: M = 1 0.4, M = 2 0.6, M = 4 0.6, M = 8 0.8).
 */
const OUTER_LR_AT_H30: readonly [number, number][] = [
  [1, 0.4],
  [2, 0.6],
  [4, 0.6],
  [8, 0.8],
];
/** The largest η the paper swept; η is never raised past it. */
const OUTER_LR_CEILING = 1;

export const planInputSchema = z.object({
  /** A preset name (nano, tiny, small, base, gpt2), or … */
  preset: z.string().optional(),
  /** … a parameter count N. */
  params: z
    .number({ error: 'the parameter count must be a number' })
    .int('a whole number of parameters')
    .min(1)
    .optional(),
  /** Expected volunteers M. */
  workers: z
    .number({ error: 'volunteers must be a number' })
    .int('a whole number of volunteers')
    .min(1, 'at least 1 volunteer')
    .max(10_000, 'at most 10000 volunteers'),
  /** Token budget D, all volunteers together (default 20·N). */
  tokens: z.number({ error: 'tokens must be a number' }).positive('tokens must be positive').optional(),
  /** Each volunteer's GPU, TFLOP/s (default ROOM_MODEL_DEFAULTS.gpuTflops, as `shoal simulate`) … */
  gpuTflops: z.number({ error: 'TFLOP/s must be a number' }).positive('TFLOP/s must be positive').optional(),
  /** … or its measured training throughput, tokens/s. */
  tokensPerSecond: z.number({ error: 'tokens/s must be a number' }).positive('tokens/s must be positive').optional(),
  /** Each volunteer's uplink (and downlink), Mbit/s. */
  linkMbps: z.number({ error: 'the link must be a number' }).positive('the link must be faster than 0 Mbit/s'),
  /** One-way latency between volunteers, ms. */
  latencyMs: z.number({ error: 'the latency must be a number' }).min(0, 'the latency cannot be negative'),
  /** Tokens per sequence (default: the preset's block size, or 2048 with a parameter count). */
  seq: z.number({ error: 'the sequence length must be a number' }).int('a whole sequence length').optional(),
});

export type PlanInput = z.input<typeof planInputSchema>;

/** The options a plan sets, named as the run options table names them (`shoal host`'s flags). */
export type PlanOptions = Partial<Pick<RunOptions, 'preset'>> &
  Pick<RunOptions, 'innerSteps' | 'fragments' | 'overlap' | 'codec' | 'lr' | 'batch' | 'seq' | 'outerLr'> &
  /** Set only where the plan takes the low-rank codec: its rank (the default target, 0, keeps it). */
  Partial<Pick<RunOptions, 'lowRank'>>;

export interface Plan {
  model: { preset: string | null; params: number; layers: number | null };
  workers: number;
  /** Token budget D. */
  tokens: number;
  fit: {
    /** N inside 35M … 2.4B: the fits are interpolated. */
    inRange: boolean;
    /** γ from the fit, before any clamping. */
    innerLr: number;
    /** B from the fit in the paper's unit (sequences of 2048 tokens), before any clamping. */
    globalBatchSequences: number;
    /** The paper's C4 loss for this N and M; null outside the fit's range (not a prediction then). */
    expectedLoss: number | null;
  };
  timing: {
    /** Tokens all volunteers train per inner step (M·batch·seq). */
    globalBatchTokens: number;
    /** Inner steps each volunteer trains for D. */
    steps: number;
    /** Modelled compute time of one inner step, ms. */
    stepMs: number;
    /**
     * Bytes one volunteer uploads for one round of the largest fragment, headers included (with
     * the low-rank codec: at its most rank, the mean of the two sides).
     */
    roundUploadBytes: number;
    /** That round's time from the contribution to the commit (the upload's, stretched, + latencies), ms. */
    roundMs: number;
    /** τ·step: how long the round may take before the volunteer waits, ms. */
    overlapMs: number;
    /** Fraction of the time the uplink carries rounds (P rounds per H steps). */
    linkBusy: number;
    /** Predicted compute utilisation (time computing over all time). */
    utilization: number;
    /** Compute time of the whole run, hours (6·N·D-style, over one volunteer's steps). */
    computeHours: number;
  };
  /** Whether the plan reaches TARGET_UTILIZATION by the model. */
  meetsTarget: boolean;
  /** What a person should know: extrapolations, clamps, a missed target. */
  notes: string[];
  options: PlanOptions;
}

/** A joint fit's value for N parameters and M replicas. */
export function jointFit(fit: JointFit, params: number, workers: number): number {
  return fit.A * params ** fit.alpha * workers ** fit.beta;
}

/** η for M replicas and H inner steps (docs/plan.md, "Outer learning rate"). */
export function outerLrFor(workers: number, innerSteps: number): number {
  const log2M = Math.log2(Math.max(1, workers));
  // piecewise linear in log2 M between the heat-map's columns, held beyond M = 8
  let base = (OUTER_LR_AT_H30.at(-1) as [number, number])[1];
  for (let i = 1; i < OUTER_LR_AT_H30.length; i++) {
    const [m0, eta0] = OUTER_LR_AT_H30[i - 1] as [number, number];
    const [m1, eta1] = OUTER_LR_AT_H30[i] as [number, number];
    if (workers <= m1) {
      const t = (log2M - Math.log2(m0)) / (Math.log2(m1) - Math.log2(m0));
      base = eta0 + t * (eta1 - eta0);
      break;
    }
  }
  // η grows with H (SL Figs. 8–9, plotted only): Shoal's guess is +0.1 per doubling past 30
  const forH = innerSteps > 30 ? 0.1 * Math.log2(innerSteps / 30) : 0;
  return Math.round(Math.min(OUTER_LR_CEILING, base + forH) * 100) / 100;
}

const signif = (x: number, digits = 3) => Number(x.toPrecision(digits));

/** The room a plan is for: the input, checked, with its model, N, M, sequence length and D. */
interface PlannedRoom {
  given: z.output<typeof planInputSchema>;
  model: GptConfig | null;
  N: number;
  M: number;
  seq: number;
  D: number;
}

/** `input` checked and completed; a RangeError with a message for a person when it makes no sense. */
function plannedRoom(input: PlanInput): PlannedRoom {
  const parsed = planInputSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new RangeError(`${issue?.path.join('.') || 'input'}: ${issue?.message ?? 'invalid'}`);
  }
  const given = parsed.data;
  if ((given.preset === undefined) === (given.params === undefined)) {
    throw new RangeError('give the model as a preset name or as a parameter count, one of the two');
  }
  if (given.gpuTflops !== undefined && given.tokensPerSecond !== undefined) {
    throw new RangeError("give each volunteer's throughput as TFLOP/s or as tokens/s, not both");
  }
  let model: GptConfig | null = null;
  if (given.preset !== undefined) {
    const spec = RUN_OPTIONS.preset;
    if (!spec.choices.includes(given.preset)) {
      throw new RangeError(`unknown model "${given.preset}": choose ${spec.choices.join(', ')}`);
    }
    model = presetConfig(given.preset);
  }
  const N = model ? buildLayout(model).size : (given.params as number);
  const seq = given.seq ?? (model ? model.blockSize : PAPER_SEQ_LEN);
  const seqLimit = Math.min(RUN_OPTIONS.seq.max, model?.blockSize ?? RUN_OPTIONS.seq.max);
  if (seq < RUN_OPTIONS.seq.min || seq > seqLimit) {
    throw new RangeError(
      `the sequence length must be ${RUN_OPTIONS.seq.min} … ${seqLimit}${model ? ` (the model's block size)` : ''}, got ${seq}`,
    );
  }
  return { given, model, N, M: given.workers, seq, D: given.tokens ?? 20 * N };
}

/** The fits' γ and B for the room (Plan.fit), γ held below the fits' range; notes on extrapolation. */
function fittedHyperparameters({ N, M }: PlannedRoom, notes: string[]) {
  const inRange = N >= FIT_PARAMS.min && N <= FIT_PARAMS.max;
  const fittedLr = jointFit(JOINT_FITS.innerLr, N, M);
  const fittedBatch = jointFit(JOINT_FITS.globalBatch, N, M);
  let lr = fittedLr;
  if (N < FIT_PARAMS.min) {
    lr = Math.min(jointFit(JOINT_FITS.innerLr, FIT_PARAMS.min, M), EXTRAPOLATED_LR_CEILING);
    notes.push(
      `N = ${formatCount(N)} is below the fits' range (35M … 2.4B): the inner lr fit would give ${signif(fittedLr, 2)}; ` +
        `it is held at its 35M value, at most ${EXTRAPOLATED_LR_CEILING} (${signif(lr, 2)}).`,
    );
    notes.push(
      `The batch fit is extrapolated below its range (${signif(fittedBatch, 2)} sequences of ${PAPER_SEQ_LEN} tokens).`,
    );
  } else if (N > FIT_PARAMS.max) {
    notes.push(
      `N = ${formatCount(N)} is above the fits' range (35M … 2.4B): γ and B are extrapolated, as the paper did for 4B and 10B.`,
    );
  }
  if (M > FIT_WORKERS_MAX) {
    notes.push(
      `M = ${M} is beyond the fits' M = 1 … 8: extrapolated in M (the paper recommends the joint fit for that).`,
    );
  }
  const expectedLoss = inRange ? jointFit(JOINT_FITS.loss, N, M) : null;
  if (expectedLoss !== null) {
    notes.push(
      "The expected loss is the paper's (C4, 32k-token vocabulary), not a prediction for a byte-level corpus.",
    );
  } else {
    notes.push('No expected loss: the loss fit would extrapolate outside 35M … 2.4B parameters.');
  }
  return { inRange, innerLr: fittedLr, globalBatchSequences: fittedBatch, expectedLoss, lr };
}

/**
 * Each volunteer's batch: the fitted B split among M, within the option's range, and below the
 * fits' range made small enough to leave MIN_STEPS inner steps; notes on each change.
 */
function batchPerVolunteer({ N, M, seq, D }: PlannedRoom, globalBatchSequences: number, notes: string[]): number {
  const wantBatch = (globalBatchSequences * PAPER_SEQ_LEN) / (M * seq);
  let batch = clamp(Math.round(wantBatch), RUN_OPTIONS.batch.min, RUN_OPTIONS.batch.max);
  if (Math.abs(batch - wantBatch) > 0.5) {
    notes.push(`The batch per volunteer would be ${signif(wantBatch, 2)} sequences: clamped to ${batch}.`);
  }
  // Checked on the whole batch: the extrapolated B rounded to the nearest whole batch could leave
  // fewer steps than B itself. The largest batch that leaves MIN_STEPS is rounded down.
  if (N < FIT_PARAMS.min && D / (M * batch * seq) < MIN_STEPS) {
    const largest = Math.floor(D / (MIN_STEPS * M * seq));
    const was = batch;
    batch = clamp(largest, RUN_OPTIONS.batch.min, batch);
    const left = Math.ceil(D / (M * batch * seq));
    notes.push(
      largest >= RUN_OPTIONS.batch.min
        ? `A batch of ${was} per volunteer would leave fewer than ${MIN_STEPS} steps in ${formatCount(D)} tokens: ` +
            `it is made ${batch}, which leaves ${formatCount(left)}.`
        : `Even a batch of 1 per volunteer leaves only ${left} steps in ${formatCount(D)} tokens, fewer than ${MIN_STEPS}: ` +
            'a larger token budget or fewer volunteers would help.',
    );
  }
  return batch;
}

/** Notes on the schedule the search took: the low-rank codec, a missed target, a τ past what was measured. */
function scheduleNotes(
  linkMbps: number,
  { chosen, pick, bestDense, bestLowRank, maxH }: ScheduleSearch,
  notes: string[],
) {
  if (pick.lowRank) {
    notes.push(
      `fp4 reaches at most ${(100 * bestDense.utilization).toFixed(0)}% on ${linkMbps} Mbit/s: the plan takes the ` +
        `low-rank codec (fp4 factors of rank ${pick.lowRank}), whose loss against fp4's is not yet measured ` +
        "at this scale. Each fragment's first round is dense: the utilisation includes that one-off wait.",
    );
  } else if (bestLowRank) {
    notes.push(
      `The low-rank codec (rank ${DEFAULT_LOW_RANK}) would reach ${(100 * bestLowRank.utilization).toFixed(0)}% at ` +
        "best (each fragment's first round is dense, a one-off wait the run must absorb).",
    );
  }
  if (!chosen) {
    notes.push(
      `No H up to ${maxH} reaches ${100 * TARGET_UTILIZATION}% on ${linkMbps} Mbit/s: the best is ` +
        `${(100 * pick.utilization).toFixed(0)}%. A faster link, faster GPUs (a longer step) or more tokens (a longer run) would help.`,
    );
  }
  if (pick.overlap > 10) {
    notes.push(`τ = ${pick.overlap}: Streaming DiLoCo measured < 0.2% loss up to τ = 10; beyond that it is untested.`);
  }
}

/**
 * The plan for `input`. Throws a RangeError with a message for a person when the input makes no
 * sense (no model, both or neither throughput, a sequence longer than the model's block size).
 */
export function plan(input: PlanInput): Plan {
  const room = plannedRoom(input);
  const { given, model, N, M, seq, D } = room;
  const notes: string[] = [];
  const { lr, ...fit } = fittedHyperparameters(room, notes);
  const batch = batchPerVolunteer(room, fit.globalBatchSequences, notes);
  const lrOption = signif(clamp(lr, RUN_OPTIONS.lr.min, RUN_OPTIONS.lr.max));
  const globalBatchTokens = M * batch * seq;
  const steps = Math.max(1, Math.ceil(D / globalBatchTokens));

  // --- the wall-clock model
  const stepFlops = model ? trainingStepFlops(model, batch, seq) : 6 * N * batch * seq;
  const gpuFlops = (given.gpuTflops ?? ROOM_MODEL_DEFAULTS.gpuTflops) * 1e12;
  const stepMs =
    given.tokensPerSecond !== undefined
      ? ((batch * seq) / given.tokensPerSecond) * 1000
      : (stepFlops / gpuFlops) * 1000;
  const search = searchSchedule({
    model,
    params: N,
    workers: M,
    steps,
    stepMs,
    linkMbps: given.linkMbps,
    latencyMs: given.latencyMs,
  });
  scheduleNotes(given.linkMbps, search, notes);
  const { pick } = search;
  const outerLr = outerLrFor(M, pick.H);
  const options: PlanOptions = {
    ...(given.preset !== undefined ? { preset: given.preset } : {}),
    innerSteps: pick.H,
    fragments: pick.P,
    overlap: pick.overlap,
    codec: pick.codec,
    lr: lrOption,
    batch,
    seq,
    outerLr,
    ...(pick.lowRank ? { lowRank: pick.lowRank } : {}),
  };
  // what the plan recommends must be a room the host accepts
  if (model) runConfigOf({ ...RUN_OPTION_DEFAULTS, ...options });
  return {
    model: { preset: given.preset ?? null, params: N, layers: model?.nLayer ?? null },
    workers: M,
    tokens: D,
    fit,
    timing: {
      globalBatchTokens,
      steps,
      stepMs,
      roundUploadBytes: pick.largest,
      roundMs: pick.roundMs,
      overlapMs: pick.overlap * stepMs,
      linkBusy: pick.linkBusy,
      utilization: pick.utilization,
      computeHours: (steps * stepMs) / 3_600_000,
    },
    meetsTarget: search.chosen !== undefined,
    notes,
    options,
  };
}

/** 10.8M, 842k, 2.4B. */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${signif(n / 1e9, 3)}B`;
  if (n >= 1e6) return `${signif(n / 1e6, 3)}M`;
  if (n >= 1e3) return `${signif(n / 1e3, 3)}k`;
  return String(n);
}

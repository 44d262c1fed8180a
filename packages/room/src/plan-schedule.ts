/**
 * The planner's wall-clock model and schedule search (docs/plan.md): for a schedule of H inner
 * steps, P fragments and a codec, the round's time from Shoal's own byte count (round-bytes.ts),
 * the smallest τ one round fits in, the uplink's load and the compute utilisation; and the
 * schedule a plan takes: the smallest H that keeps the GPUs TARGET_UTILIZATION busy.
 *
 * Pure (no I/O, no node modules), as plan.ts.
 */
import { buildFragments, type CodecName, DEFAULT_LOW_RANK, type Fragment, type FragmentMode } from '@shoal/diloco';
import { buildLayout, type GptConfig } from '@shoal/model';
import { roundUploadBytes } from './round-bytes.ts';
import { RUN_OPTION_DEFAULTS, RUN_OPTIONS, runConfigOf } from './run-options.ts';

/** The compute utilisation a plan must reach. */
export const TARGET_UTILIZATION = 0.95;

/** One-way latencies in a round after the contribution leaves: to the owner, the result back, the hash report, the commit. */
const ROUND_LATENCIES = 4;
/**
 * A round takes longer than its upload: every worker sends shard 0 first and shard M−1 last, so the
 * last owner's contributions arrive late and its result leaves later still. Measured in `shoal
 * simulate` (small, 8 workers, 10 Mbit/s, fp4): open to commit 20.3 s against 13.4 s of upload.
 */
const ROUND_TIME_PER_UPLOAD_TIME = 1.5;
/** Slack on the round time when τ is picked: steps and rounds do not line up exactly. */
const ROUND_MARGIN = 1.1;
/** Without a preset's layer count, at most this many fragments. */
const MAX_FRAGMENTS_WITHOUT_LAYERS = 16;

export const clamp = (x: number, min: number, max: number) => Math.min(max, Math.max(min, x));

/** What the wall-clock model knows of a room. */
export interface ScheduleRoom {
  /** The preset's shapes; null for a model given as a parameter count N. */
  model: GptConfig | null;
  /** N. */
  params: number;
  /** M. */
  workers: number;
  /** Inner steps each volunteer trains for D. */
  steps: number;
  /** Modelled compute time of one inner step, ms. */
  stepMs: number;
  linkMbps: number;
  latencyMs: number;
}

/** A schedule and its figures by the wall-clock model. */
export interface Candidate {
  H: number;
  P: number;
  codec: CodecName;
  lowRank: number | null;
  /** τ. */
  overlap: number;
  /** The largest fragment's upload, bytes. */
  largest: number;
  roundMs: number;
  linkBusy: number;
  utilization: number;
  /** Whether it reaches TARGET_UTILIZATION with the uplink at most that busy. */
  meets: boolean;
}

/** Candidate H, smallest first: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k, whole numbers. */
function innerStepCandidates(max: number): number[] {
  const out = new Set<number>();
  for (let decade = 1; decade <= RUN_OPTIONS.innerSteps.max; decade *= 10) {
    for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8]) {
      const H = Math.round(m * decade);
      if (H <= max) out.add(H);
    }
  }
  return [...out].sort((a, b) => a - b);
}

/** The room's fragment mode, as runConfigOf sets it (fragment sizes depend on it). */
let fragmentMode: FragmentMode | undefined;

/** The wall-clock model of `room`: a schedule's figures. */
function scheduleModel(
  room: ScheduleRoom,
): (H: number, P: number, codec: CodecName, lowRank?: number | null) => Candidate {
  const { model, params: N, workers: M, steps, stepMs } = room;
  const linkBytesPerMs = (room.linkMbps * 1e6) / 8 / 1000;
  // A model given as a parameter count has no shapes: its fragments are sizes, with no low-rank codec.
  const fragmentCache = new Map<number, Pick<Fragment, 'size' | 'tensors'>[]>();
  const fragmentsFor = (P: number) => {
    let fragments = fragmentCache.get(P);
    if (!fragments) {
      fragmentMode ??= runConfigOf(RUN_OPTION_DEFAULTS).diloco.fragmentMode;
      fragments = model
        ? buildFragments(buildLayout(model), P, fragmentMode)
        : Array.from({ length: P }, (_, p) => ({ size: Math.floor(N / P) + (p < N % P ? 1 : 0), tensors: [] }));
      fragmentCache.set(P, fragments);
    }
    return fragments;
  };
  const blockSize = RUN_OPTIONS.blockSize.default;
  /** A round's time, ms, from its largest upload, with `sharing` rounds on the uplink at once. */
  const roundTime = (largest: number, sharing: number) =>
    (sharing * ROUND_TIME_PER_UPLOAD_TIME * largest) / linkBytesPerMs + ROUND_LATENCIES * room.latencyMs;
  return (H, P, codec, lowRank = null) => {
    const fragments = fragmentsFor(P);
    const upload = (fragment: (typeof fragments)[number], rank: number | null) =>
      roundUploadBytes({
        values: fragment.size,
        workers: M,
        codec,
        blockSize,
        ...(rank ? { lowRank: { tensors: fragment.tensors, rank } } : {}),
      });
    const uploads = fragments.map((f) => upload(f, lowRank));
    const largest = Math.max(...uploads);
    const linkBusy = uploads.reduce((a, b) => a + b, 0) / linkBytesPerMs / (H * stepMs);
    // τ: the smallest that one round fits in (τ < H). Fragments open H/P steps apart, so a τ past
    // H/P has ⌈τ·P/H⌉ rounds sharing the uplink, each the slower: grow τ until it holds.
    // (and within the option's range: past it the round stalls, which utilisation counts)
    const maxOverlap = Math.min(H - 1, RUN_OPTIONS.overlap.max);
    let overlap = Math.min(1, maxOverlap);
    let roundMs = roundTime(largest, 1);
    for (;;) {
      const sharing = clamp(Math.ceil((overlap * P) / H), 1, P);
      roundMs = roundTime(largest, sharing);
      const needed = Math.ceil((ROUND_MARGIN * roundMs) / stepMs);
      if (needed <= overlap || overlap === maxOverlap) break;
      overlap = Math.min(needed, maxOverlap);
    }
    const stallMs = Math.max(0, roundMs - overlap * stepMs);
    let utilization = (H * stepMs) / (H * stepMs + P * stallMs);
    if (linkBusy > 1) utilization = Math.min(utilization, 1 / linkBusy);
    if (lowRank) {
      // each fragment's first round is dense (its momentum, the bases' source, is still zero): a
      // one-off wait, the P dense rounds sharing the uplink, spread over the run's compute
      const firstStallMs = Math.max(
        0,
        roundTime(Math.max(...fragments.map((f) => upload(f, null))), P) - overlap * stepMs,
      );
      const computeMs = steps * stepMs;
      utilization = computeMs / (computeMs / utilization + firstStallMs);
    }
    const meets = utilization >= TARGET_UTILIZATION && linkBusy <= TARGET_UTILIZATION;
    return { H, P, codec, lowRank, overlap, largest, roundMs, linkBusy, utilization, meets };
  };
}

/** What the search found. */
export interface ScheduleSearch {
  /** The schedule that meets the target; undefined when none does. */
  chosen: Candidate | undefined;
  /** The schedule a plan takes: the chosen one, else the best. */
  pick: Candidate;
  /** The best dense (fp32 or fp4) schedule's utilisation. */
  bestDense: Candidate;
  /** Where no dense schedule meets the target and the model has shapes: the best low-rank one. */
  bestLowRank: Candidate | undefined;
  /** The largest H tried. */
  maxH: number;
}

/**
 * The smallest H that meets the target (better loss); at that H fp32 if it meets it, else fp4;
 * then the P with the smallest τ (the least stale merge), the fewest fragments on a tie. Only where
 * no H does, the low-rank codec (its loss against fp4's is not yet measured); where it does not
 * either, the dense plan stands.
 */
export function searchSchedule(room: ScheduleRoom): ScheduleSearch {
  const { model } = room;
  const evaluate = scheduleModel(room);
  const maxFragments = model ? Math.min(model.nLayer, RUN_OPTIONS.fragments.max) : MAX_FRAGMENTS_WITHOUT_LAYERS;
  // at least 3 rounds of each fragment in the run, else H is no schedule
  const candidates = innerStepCandidates(Math.max(1, Math.floor(room.steps / 3)));
  let chosen: Candidate | undefined;
  let best: Candidate | undefined;
  const search = (codecs: readonly (readonly [CodecName, number | null])[]) => {
    for (const H of candidates) {
      for (const [codec, lowRank] of codecs) {
        for (let P = 1; P <= Math.min(maxFragments, H); P++) {
          const candidate = evaluate(H, P, codec, lowRank);
          if (candidate.meets && (!chosen || candidate.overlap < chosen.overlap)) chosen = candidate;
          if (!best || candidate.utilization > best.utilization) best = candidate;
        }
        if (chosen) return;
      }
    }
  };
  search([
    ['fp32', null],
    ['fp4', null],
  ]);
  const bestDense = best as Candidate;
  let bestLowRank: Candidate | undefined;
  if (!chosen && model) {
    best = undefined;
    search([['fp4', DEFAULT_LOW_RANK]]);
    bestLowRank = best;
    best = bestDense;
  }
  const pick: Candidate = chosen ?? best ?? evaluate(1, 1, 'fp4');
  return { chosen, pick, bestDense, bestLowRank, maxH: candidates.at(-1) ?? 1 };
}

/**
 * The room view: what a host shows of its room (the dashboard's charts and tables) and publishes
 * to the signaling server for the read-only watch link. One shape for every producer (the
 * dashboard's host worker, `shoal host`) and every consumer (the dashboard, the watch page), so
 * a room run from Node looks the same as one run from a browser.
 *
 * A host publishes `RoomViewUpdate`s: the latest snapshot of everything that is a table (peers,
 * rounds, totals) plus the chart points recorded since its previous update. A watcher gets the
 * whole history first (the server keeps a bounded, thinned series), then every update.
 *
 * Times: `t` and the rounds' times are ms since the run started (`startedAt`, epoch ms), so
 * charts need no clock agreement between the host and the watcher.
 */
import { z } from 'zod';
import { MAX_PIPELINE_STAGES } from './limits.ts';
import { pipelineConfigSchema, roleSchema, runConfigSchema } from './schemas.ts';

export const ROOM_VIEW_VERSION = 1;
/** Peers in one view: a room's members are bounded by the server's maxPeersPerRoom (≤ 256). */
export const MAX_VIEW_PEERS = 256;
/** Rounds in one view: the most recent ones (the timeline shows a window, not the whole run). */
export const MAX_VIEW_ROUNDS = 120;
/** Points in one update; the server keeps at most MAX_VIEW_HISTORY, thinning the oldest half. */
export const MAX_VIEW_POINTS = 2_000;
export const MAX_VIEW_HISTORY = 2_000;

const finite = z.number().refine(Number.isFinite, 'a finite number');
const nonNegative = z.number().min(0).refine(Number.isFinite, 'a finite number');
const count = z.int().min(0);
const lossValue = finite.nullable();
const shortText = z.string().max(500);

export const roomStatusSchema = z.enum(['waiting', 'running', 'paused', 'stopped']);
export type RoomStatus = z.infer<typeof roomStatusSchema>;

const peerId = z.string().min(1).max(128);
const stageIndex = z
  .int()
  .min(0)
  .max(MAX_PIPELINE_STAGES - 1);

/** A worker's place in a pipeline-parallel room: its group and stage, and the blocks its stage holds. */
export const roomViewPlaceSchema = z.object({
  group: count,
  stage: stageIndex,
  /** Bumped whenever its group's members change. */
  version: count,
  /** The transformer blocks [firstBlock, endBlock) of its stage. */
  firstBlock: count,
  endBlock: count,
});
export type RoomViewPlace = z.infer<typeof roomViewPlaceSchema>;

/** One stage of a pipeline room's split. */
export const roomViewStageSchema = z.object({
  stage: stageIndex,
  firstBlock: count,
  endBlock: count,
  /** The first stage: wte and wpe too. */
  embeds: z.boolean(),
  /** The last stage: ln_f, the tied head and the loss. */
  head: z.boolean(),
  /** What a volunteer holding it needs, bytes (inner and outer state, activations in flight). */
  memoryBytes: nonNegative,
});
export type RoomViewStage = z.infer<typeof roomViewStageSchema>;

/** One replica group of a pipeline room. */
export const roomViewGroupSchema = z.object({
  id: count,
  version: count,
  /** The member holding each stage (index = stage); null: the slot waits for a volunteer. */
  members: z.array(peerId.nullable()).max(MAX_PIPELINE_STAGES),
  /** Every stage is held: the group trains. */
  complete: z.boolean(),
  /** The stages that wait for a volunteer, lowest first (empty when complete). */
  waitingFor: z.array(stageIndex).max(MAX_PIPELINE_STAGES),
});
export type RoomViewGroup = z.infer<typeof roomViewGroupSchema>;

/** A pipeline room's section of the view: the run's pipeline settings, its split and its groups. */
export const roomViewPipelineSchema = pipelineConfigSchema.extend({
  split: z.array(roomViewStageSchema).max(MAX_PIPELINE_STAGES),
  /** Lowest id first. */
  groups: z.array(roomViewGroupSchema).max(MAX_VIEW_PEERS),
  /** Workers in no group (no stage fits them). */
  unplaced: z.array(peerId).max(MAX_VIEW_PEERS),
});
export type RoomViewPipeline = z.infer<typeof roomViewPipelineSchema>;

export const roomViewPeerSchema = z.object({
  peer: z.string().min(1).max(128),
  role: roleSchema,
  /** The roster's status: joining, syncing, synced, diverged, unreachable, excluded. */
  status: z.string().max(32),
  /** Why it is unreachable, diverged or excluded; '' otherwise. */
  reason: shortText,
  backend: z.string().max(16),
  adapter: shortText,
  tokensPerSecond: nonNegative,
  innerStep: count,
  /** Its last reported training loss. */
  loss: lossValue,
  /** ms since its last heartbeat, at the time of the view. */
  lastSeenMs: nonNegative,
  /** Committed rounds it contributed to. */
  roundsContributed: count,
  /** Its contributions that shard owners refused, by reason ('non-finite', 'norm', 'length', …). */
  rejected: z.record(z.string().max(64), count),
  bytesSent: nonNegative,
  bytesReceived: nonNegative,
  /**
   * Its tokens ÷ the room's tokens, both counted since it joined this host (0 … 1): alone in the
   * room, 1. Absent in views from before shares.
   */
  share: z.number().min(0).max(1).optional(),
  /** Its place in a pipeline-parallel room; absent otherwise, and while it has none. */
  pipeline: roomViewPlaceSchema.optional(),
});
export type RoomViewPeer = z.infer<typeof roomViewPeerSchema>;

export const roomViewRoundSchema = z.object({
  fragment: count,
  round: count,
  participants: count,
  /** ms since the run started: round-open sent. */
  openedAt: nonNegative,
  /** First result shard reached the host: the owners have reduced. */
  reducedAt: nonNegative.nullable(),
  /** Every result shard reached the host: the all-gather is done. */
  gatheredAt: nonNegative.nullable(),
  /** Committed or aborted. */
  endedAt: nonNegative.nullable(),
  outcome: z.enum(['open', 'committed', 'aborted']),
  /** The abort's reason, or the committed hash's first 16 hex digits. */
  detail: shortText,
  /** The round's quantiser ('fp4', …). Absent in views from before low-rank rounds. */
  codec: z.string().max(16).optional(),
  /** The round's low-rank rank; null: a dense round. Absent in views from before low-rank rounds. */
  rank: count.nullable().optional(),
  /**
   * An open round: the participants whose contribution its shard owners still wait for, as they
   * say. Absent when it waits for nobody, and in older views.
   */
  waitingFor: z.array(z.string().min(1).max(128)).max(256).optional(),
});
export type RoomViewRound = z.infer<typeof roomViewRoundSchema>;

export const roomViewPointSchema = z.object({
  /** ms since the run started. */
  t: nonNegative,
  /** The room's total tokens trained. */
  tokens: nonNegative,
  /** The room's step: its tokens ÷ tokens per step, the learning-rate schedule's position. */
  step: count,
  /** Mean of the workers' last training losses. */
  trainLoss: lossValue,
  /** The host's validation loss on θ_global (the latest evaluation). */
  evalLoss: lossValue,
  /** Sum of the workers' tokens/s. */
  tokensPerSecond: nonNegative,
  /** Bytes the whole room has sent on the mesh (the host's and every member's counter), never going back. */
  bytes: nonNegative,
  /** What fp32 DiLoCo (ring all-reduce of each committed round's fragment) would have sent. */
  fp32Bytes: nonNegative,
  /** What data-parallel training (a ring all-reduce of every gradient, every step) would have sent. */
  dpBytes: nonNegative,
  /** Per worker: its last loss and tokens/s. */
  peers: z.record(z.string().min(1).max(128), z.object({ loss: lossValue, tokensPerSecond: nonNegative })),
});
export type RoomViewPoint = z.infer<typeof roomViewPointSchema>;

/**
 * How the room's rounds travel, for the bandwidth chart: defined once by the host's recorder, so
 * the dashboard and the watch page show the same words.
 */
export const roomViewWireSchema = z.object({
  /** The quantiser of the latest round (the run's codec before the first). */
  codec: z.string().max(16),
  /** Each fragment's rank in its latest round; 0: a dense round; null: none opened yet. */
  ranks: z.array(count.nullable()).max(256),
  /** In words: 'fp4 (dense)', 'fp4, low-rank r 8 / 4 (adaptive, ≤ 8) · one-step delay'. */
  label: shortText,
});
export type RoomViewWire = z.infer<typeof roomViewWireSchema>;

/**
 * A fragment's next round on the coordinator's schedule: it opens when the median worker reaches
 * `atStep` of its own steps (staggered, docs/design.md "Rounds in a room of unequal GPUs").
 */
export const roomViewNextRoundSchema = z.object({
  fragment: count,
  /** The round it will be (its last round + 1). */
  round: count,
  /** A round of it is open now: the next one waits for it. */
  open: z.boolean(),
  /** The median worker's steps still to go (0 when it is due or open). */
  steps: count,
  /** Those steps at the room's median step time, ms; null before any worker's speed is known. */
  etaMs: nonNegative.nullable(),
});
export type RoomViewNextRound = z.infer<typeof roomViewNextRoundSchema>;

/**
 * θ_global's validation loss over the run: the best evaluation and whether it is rising
 * (@shoal/swarm's evalTrendOf defines the rule, once).
 */
export const roomViewEvalTrendSchema = z.object({
  best: finite,
  /** The room's step at the best evaluation. */
  bestStep: count,
  latest: finite,
  rising: z.boolean(),
});
export type RoomViewEvalTrend = z.infer<typeof roomViewEvalTrendSchema>;

/** Why a stopped room stopped: the host pressed Stop, or the learning-rate schedule ended. */
export const roomEndSchema = z.enum(['host', 'schedule']);
export type RoomEnd = z.infer<typeof roomEndSchema>;

export const roomViewMetricsSchema = z.object({
  /**
   * The room's step: the median volunteer's place on the learning-rate schedule, which never goes
   * back (not when a volunteer far ahead leaves, not across a host's reload).
   */
  step: count,
  tokens: nonNegative,
  trainLoss: lossValue,
  evalLoss: lossValue,
  tokensPerSecond: nonNegative,
  /** The host's own mesh counters (a reloaded host's go on from the previous page's). */
  bytesSent: nonNegative,
  bytesReceived: nonNegative,
  roundsCommitted: count,
  roundsAborted: count,
  /** Each fragment's last committed round and θ_global‖m hash. */
  fragments: z.array(z.object({ round: count, hash: z.string().max(128) })).max(256),
  /** The codec and ranks in use. Absent in views from before low-rank rounds. */
  wire: roomViewWireSchema.optional(),
  /** The median synced worker's ms per inner step; null before any speed is known. */
  stepMs: nonNegative.nullable().optional(),
  /** Each fragment's next round (absent in older views). */
  nextRounds: z.array(roomViewNextRoundSchema).max(256).optional(),
  /** The validation loss's best and trend; null before the first evaluation. */
  evalTrend: roomViewEvalTrendSchema.nullable().optional(),
});
export type RoomViewMetrics = z.infer<typeof roomViewMetricsSchema>;

export const roomViewUpdateSchema = z.object({
  version: z.literal(ROOM_VIEW_VERSION),
  roomId: z.string().min(1).max(128),
  status: roomStatusSchema,
  config: runConfigSchema,
  /** Epoch ms when the run started (Date.now() of the host). */
  startedAt: nonNegative,
  /** Who runs the host: 'dashboard' or 'shoal host'. */
  hostKind: z.enum(['dashboard', 'cli']),
  metrics: roomViewMetricsSchema,
  peers: z.array(roomViewPeerSchema).max(MAX_VIEW_PEERS),
  rounds: z.array(roomViewRoundSchema).max(MAX_VIEW_ROUNDS),
  /** Chart points since the previous update (the whole thinned history in a watcher's first view). */
  points: z.array(roomViewPointSchema).max(MAX_VIEW_POINTS),
  /** A pipeline-parallel room's settings, split and groups; absent otherwise. */
  pipeline: roomViewPipelineSchema.optional(),
  /** A stopped room: why it stopped (absent while it runs, and in older views). */
  endedBy: roomEndSchema.optional(),
});
export type RoomViewUpdate = z.infer<typeof roomViewUpdateSchema>;

/**
 * Appends `points` to `history`, keeping at most `max`: when full, every other point of the
 * older half is dropped, so a long run keeps its whole shape at a coarser grain.
 */
export function appendThinned<T>(history: T[], points: readonly T[], max = MAX_VIEW_HISTORY): T[] {
  let out = history.concat(points);
  while (out.length > max) {
    const half = Math.floor(out.length / 2);
    out = out
      .slice(0, half)
      .filter((_, i) => i % 2 === 0)
      .concat(out.slice(half));
  }
  return out;
}

/**
 * What a mesh stage checks of a group member's pipe message before it keeps it, as pure functions
 * of the run's shapes and the stage's view of its group: who may send each kind (and who does, in
 * the group's current version or a newer one), its exact size, its values, how far ahead its
 * version may be, and how many bytes and messages one peer may have waiting at a stage.
 */
import { type PeerId, type PipelineSlot, type PipeMessage, pipePayloadBytes, type RunConfig } from '@shoal/protocol';
import { bytesPerValue, firstNonFinite } from './wire-values.ts';

type Kind = PipeMessage['what'];

/**
 * How far past the newest group version its latest roster shows a stage takes a message's
 * version (the roster saying so is on its way). One change of membership bumps a few versions
 * (the slot emptied or filled, then each member that re-forming moves, and its old and new
 * group); 64 is several rosters of that in a large room. What lies beyond cannot be a version
 * the sender has seen, and what is kept within it is bounded by the per-peer budget anyway.
 */
export const VERSION_WINDOW = 64;

/** A refusal: a reason code for the counters (and the `rejected` answer), and a sentence. */
export interface PipeProblem {
  reason: 'not-participant' | 'size' | 'version' | 'non-finite' | 'payload' | 'quota';
  detail: string;
}

/** The stages that send `kind` to stage `s` of `stages`. */
export function sendersOf(kind: Kind, s: number, stages: number): number[] {
  const last = stages - 1;
  switch (kind) {
    case 'act':
      return s > 0 ? [s - 1] : [];
    case 'grad':
      return s < last ? [s + 1] : [];
    case 'tied':
      return s === 0 ? [last] : s === last ? [0] : [];
    case 'wte':
      return s === last ? [0] : [];
    case 'norm':
      return [...Array(stages).keys()].filter((t) => t !== s);
  }
}

/** The message's size against the run's shapes (micro-batch × T × C values, and so on), or null. */
export function shapeProblem(config: RunConfig, m: PipeMessage): PipeProblem | null {
  const { model, train, pipeline } = config;
  if (!pipeline) return { reason: 'size', detail: 'this run has no pipeline' };
  const rows = (train.batchSize / pipeline.micros) * train.seqLen;
  const wanted: Record<Kind, [number[], number, PipeMessage['dtype']]> = {
    act: [[rows * model.nEmbd], rows, pipeline.activations], // B/M × T × C, then B/M × T targets
    grad: [[rows * model.nEmbd], 0, pipeline.activations],
    tied: [[model.vocabSize * model.nEmbd], 0, 'f32'], // V × C
    wte: [[0, model.vocabSize * model.nEmbd], 0, 'f32'], // none when it did not change
    norm: [[0], 0, 'f32'],
  };
  const [values, targets, dtype] = wanted[m.what];
  if (!values.includes(m.values) || m.targets !== targets || m.dtype !== dtype) {
    return {
      reason: 'size',
      detail: `${m.what}: ${m.values} ${m.dtype} values and ${m.targets} targets, expected ${values.join(' or ')} ${dtype} and ${targets}`,
    };
  }
  if (m.micro >= pipeline.micros) return { reason: 'size', detail: `micro-batch ${m.micro} of ${pipeline.micros}` };
  // the wire checks this too; a stage driven in-process (a probe) gets no wire
  if (m.payload.byteLength !== pipePayloadBytes(m)) {
    return {
      reason: 'size',
      detail: `${m.what}: ${m.payload.byteLength} payload bytes, its body implies ${pipePayloadBytes(m)}`,
    };
  }
  return null;
}

/** NaN or ±∞ among its values, or a target outside the vocabulary; null when it has neither. */
export function valuesProblem(config: RunConfig, m: PipeMessage): PipeProblem | null {
  const bad = firstNonFinite(m.payload, 0, m.values, m.dtype);
  if (bad >= 0) return { reason: 'non-finite', detail: `a ${m.what} message carried a non-finite value at ${bad}` };
  if (m.targets === 0) return null;
  const V = config.model.vocabSize;
  const view = new DataView(m.payload.buffer, m.payload.byteOffset + m.values * bytesPerValue(m.dtype), 4 * m.targets);
  for (let i = 0; i < m.targets; i++) {
    const t = view.getInt32(4 * i, true);
    if (t < 0 || t >= V) return { reason: 'payload', detail: `an act message carried target ${t}, outside [0, ${V})` };
  }
  return null;
}

/**
 * Payload bytes of `kind` that the member sending it may have waiting at a stage: two steps of
 * it. An honest neighbour is at most a step ahead (a stage starts its next step only once every
 * stage's norm of this one is in), so one step queued while this stage finishes its own, and the
 * next step's: M activations or gradients (B/M × T × C values each, activations with B/M × T
 * int32 targets), or one tied gradient or wte (V × C f32). Norms carry no payload; their count is
 * bounded per queue. A peer's budget is the sum over the kinds its stage sends this one.
 */
export function budgetBytes(config: RunConfig, kind: Kind): number {
  const { model, train, pipeline } = config;
  if (!pipeline) return 0;
  const M = pipeline.micros;
  const rows = (train.batchSize / M) * train.seqLen;
  const wide = bytesPerValue(pipeline.activations);
  const step: Record<Kind, number> = {
    act: M * rows * (model.nEmbd * wide + 4),
    grad: M * rows * model.nEmbd * wide,
    tied: 4 * model.vocabSize * model.nEmbd,
    wte: 4 * model.vocabSize * model.nEmbd,
    norm: 0,
  };
  return 2 * step[kind];
}

/** What a stage knows of its group when it checks who sent a message. */
export interface GroupView {
  slot: PipelineSlot;
  /** Who holds each stage of the group, in its current version. */
  peers: readonly (PeerId | null)[];
  stages: number;
  /** The newest group version the latest roster shows. */
  newestVersion: number;
}

/** In the group's current version: the stage `from` holds, when it sends this stage `message`'s kind. */
export function currentSender(view: GroupView, from: PeerId, message: PipeMessage): number | PipeProblem {
  const s = view.slot.stage;
  const sender = view.peers.indexOf(from);
  if (sender < 0) return { reason: 'not-participant', detail: `${from} holds no stage of this group` };
  if (!sendersOf(message.what, s, view.stages).includes(sender)) {
    return { reason: 'not-participant', detail: `stage ${sender} does not send ${message.what} to stage ${s}` };
  }
  return sender;
}

/**
 * In a newer version than the roster has shown (its roster is on the way): the stage an act or
 * wte comes from, when `from` holds it now or it is empty; any other kind comes only from a
 * stage that has taken this one's part in that version, which needs this stage to know it.
 */
export function futureSender(view: GroupView, from: PeerId, message: PipeMessage): number | PipeProblem {
  const s = view.slot.stage;
  const { version, what } = message;
  if (version > view.newestVersion + VERSION_WINDOW) {
    return {
      reason: 'version',
      detail: `version ${version} is more than ${VERSION_WINDOW} past the newest this worker knows (${view.newestVersion})`,
    };
  }
  const senders = what === 'act' || what === 'wte' ? sendersOf(what, s, view.stages) : [];
  const sender = senders[0];
  if (sender === undefined) {
    return { reason: 'version', detail: `${what} of version ${version}, which this worker has no roster for` };
  }
  const holder = view.peers[sender] ?? null;
  if (holder !== null && holder !== from) {
    return {
      reason: 'not-participant',
      detail: `${from} does not hold stage ${sender} of this group (${holder} does)`,
    };
  }
  return sender;
}

/**
 * Whether keeping `message` would take its queue (`queued`: one kind from one stage, one peer)
 * past two steps of that kind (budgetBytes), or past two steps of messages: an honest neighbour
 * is at most a step ahead, so a flood is refused, not kept.
 */
export function queueProblem(
  config: RunConfig,
  from: PeerId,
  message: PipeMessage,
  queued: readonly PipeMessage[],
): PipeProblem | null {
  const budget = budgetBytes(config, message.what);
  const held = queued.reduce((sum, m) => sum + m.payload.byteLength, 0);
  if (held + message.payload.byteLength > budget) {
    return {
      reason: 'quota',
      detail: `${from} has ${held} bytes of ${message.what} waiting here; its budget is ${budget}`,
    };
  }
  if (queued.length >= 2 * (config.pipeline?.micros ?? 0) + 4) {
    return { reason: 'quota', detail: `more than a step of ${message.what} queued` };
  }
  return null;
}

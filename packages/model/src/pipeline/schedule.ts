/**
 * A pure model of one pipeline-parallel training step (GPipe, PipeDream-1F1B as used by DiLoCoX):
 * a replica of S stage workers, each holding a slice of the blocks, passes every micro-batch's
 * activations forward and their gradients backward over network links. The benchmark and the
 * simulator use it to time a step and its bubble without running a model.
 */

export type PipelineSchedule = 'gpipe' | '1f1b';
export const PIPELINE_SCHEDULES: readonly PipelineSchedule[] = ['gpipe', '1f1b'];

/** One micro-batch's forward (F) or backward (B) on one stage. */
export interface PipelineOp {
  stage: number;
  micro: number;
  kind: 'F' | 'B';
}

function requireCount(field: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${field} must be a positive integer, got ${value}`);
}

/**
 * Each stage's op order for S stages and M micro-batches. GPipe: all F then all B (B in micro
 * order 0…M−1), so every stage holds all M activations at once. 1F1B (non-interleaved,
 * PipeDream-Flush / Megatron): stage s does min(S−s−1, M) warm-up forwards, then alternates one F
 * one B, then drains the remaining B; it holds at most min(S−s, M) activations, with the same
 * bubble as GPipe.
 */
export function scheduleOrder(schedule: PipelineSchedule, stages: number, micros: number): PipelineOp[][] {
  if (!PIPELINE_SCHEDULES.includes(schedule)) {
    throw new RangeError(`schedule must be one of ${PIPELINE_SCHEDULES.join(', ')}, got "${schedule}"`);
  }
  requireCount('stages', stages);
  requireCount('micros', micros);
  const orders: PipelineOp[][] = [];
  for (let stage = 0; stage < stages; stage++) {
    const F = (micro: number): PipelineOp => ({ stage, micro, kind: 'F' });
    const B = (micro: number): PipelineOp => ({ stage, micro, kind: 'B' });
    const order: PipelineOp[] = [];
    if (schedule === 'gpipe') {
      for (let m = 0; m < micros; m++) order.push(F(m));
      for (let m = 0; m < micros; m++) order.push(B(m));
    } else {
      const warmup = Math.min(stages - stage - 1, micros);
      for (let m = 0; m < warmup; m++) order.push(F(m));
      // Steady state: each new forward is followed by the oldest backward still owed.
      for (let m = warmup; m < micros; m++) order.push(F(m), B(m - warmup));
      for (let m = micros - warmup; m < micros; m++) order.push(B(m));
    }
    orders.push(order);
  }
  return orders;
}

export interface ScheduleInput {
  schedule: PipelineSchedule;
  /** Seconds of one micro-batch's forward on each stage (length S). */
  forwardSeconds: readonly number[];
  /** Seconds of one micro-batch's backward on each stage (length S). */
  backwardSeconds: readonly number[];
  micros: number;
  /**
   * Seconds to send one micro-batch's activations (or their gradient) between neighbouring
   * stages; default 0. A link carries one message at a time per direction.
   */
  transferSeconds?: number;
  /** Seconds after the last backward for the step's end on each stage (the clip-norm exchange and AdamW), default 0. */
  optimizerSeconds?: readonly number[];
}

export interface ScheduleResult {
  /** Makespan of the step, seconds. */
  stepSeconds: number;
  /** Compute-busy seconds per stage: its forwards, backwards and optimizer tail. */
  busySeconds: number[];
  /** 1 − Σ busy / (S × stepSeconds): the idle share of the stages' time. */
  bubbleFraction: number;
  /**
   * Per stage, the most micro-batches whose forward activations are held at once (forward done,
   * backward not yet): the stage's activation-memory multiplier.
   */
  peakInFlight: number[];
  /** Every op with its start and end, seconds from the step's start, in the order it was placed. */
  timeline: { stage: number; micro: number; kind: 'F' | 'B'; start: number; end: number }[];
}

function requireTimes(field: string, values: readonly number[], stages: number): void {
  if (values.length !== stages)
    throw new RangeError(`${field} must have one entry per stage (${stages}), got ${values.length}`);
  for (const [i, v] of values.entries()) {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`${field}[${i}] must be a finite time ≥ 0 s, got ${v}`);
  }
}

/** One stage's clock and what it has learned from its neighbours; undefined = not known yet. */
interface StageState {
  order: PipelineOp[];
  next: number;
  /** When the stage finishes its latest op, seconds. */
  free: number;
  busy: number;
  inFlight: number;
  peakInFlight: number;
  forwardEnd: (number | undefined)[];
  /** Per micro-batch, when its activations from s−1 arrive. */
  activationArrival: (number | undefined)[];
  /** Per micro-batch, when its gradient from s+1 arrives. */
  gradientArrival: (number | undefined)[];
  /** When the outgoing links s→s+1 and s→s−1 finish their latest message, seconds. */
  forwardLinkFree: number;
  backwardLinkFree: number;
}

/**
 * Times one step. Each stage runs its ops strictly in `scheduleOrder` order, one at a time.
 * F(s,m) waits for F(s−1,m) and for its activations to cross link s−1→s; B(s,m) waits for F(s,m)
 * and, below the last stage (which computes the loss), for B(s+1,m) and its gradient to cross
 * back. Every message on a link in one direction comes from one stage, in that stage's op order,
 * so serialising them first-come first-served is serialising them in op order.
 */
export function simulateSchedule(input: ScheduleInput): ScheduleResult {
  const { schedule, forwardSeconds, backwardSeconds, micros } = input;
  const stages = forwardSeconds.length;
  requireCount('forwardSeconds.length (stages)', stages);
  requireCount('micros', micros);
  requireTimes('forwardSeconds', forwardSeconds, stages);
  requireTimes('backwardSeconds', backwardSeconds, stages);
  const transferSeconds = input.transferSeconds ?? 0;
  requireTimes('transferSeconds', [transferSeconds], 1);
  const optimizerSeconds = input.optimizerSeconds ?? new Array<number>(stages).fill(0);
  requireTimes('optimizerSeconds', optimizerSeconds, stages);

  const states: StageState[] = scheduleOrder(schedule, stages, micros).map((order) => ({
    order,
    next: 0,
    free: 0,
    busy: 0,
    inFlight: 0,
    peakInFlight: 0,
    forwardEnd: [],
    activationArrival: [],
    gradientArrival: [],
    forwardLinkFree: 0,
    backwardLinkFree: 0,
  }));

  /** Start time of the op once every input it needs is known. */
  const readyAt = (state: StageState, { stage, micro, kind }: PipelineOp): number | undefined => {
    if (kind === 'F') return stage === 0 ? 0 : state.activationArrival[micro];
    const own = state.forwardEnd[micro];
    if (stage === stages - 1) return own;
    const gradient = state.gradientArrival[micro];
    return own === undefined || gradient === undefined ? undefined : Math.max(own, gradient);
  };

  const timeline: ScheduleResult['timeline'] = [];
  let remaining = stages * micros * 2;
  while (remaining > 0) {
    let progressed = false;
    for (const [s, state] of states.entries()) {
      for (let op = state.order[state.next]; op !== undefined; op = state.order[++state.next]) {
        const ready = readyAt(state, op);
        if (ready === undefined) break;
        const start = Math.max(state.free, ready);
        const duration = (op.kind === 'F' ? forwardSeconds[s] : backwardSeconds[s]) ?? 0;
        const end = start + duration;
        state.free = end;
        state.busy += duration;
        timeline.push({ ...op, start, end });
        if (op.kind === 'F') {
          state.forwardEnd[op.micro] = end;
          state.peakInFlight = Math.max(state.peakInFlight, ++state.inFlight);
          const downstream = states[s + 1];
          if (downstream) {
            state.forwardLinkFree = Math.max(state.forwardLinkFree, end) + transferSeconds;
            downstream.activationArrival[op.micro] = state.forwardLinkFree;
          }
        } else {
          state.inFlight--;
          const upstream = states[s - 1];
          if (upstream) {
            state.backwardLinkFree = Math.max(state.backwardLinkFree, end) + transferSeconds;
            upstream.gradientArrival[op.micro] = state.backwardLinkFree;
          }
        }
        remaining--;
        progressed = true;
      }
    }
    if (!progressed) {
      const stuck = states.flatMap(({ order, next }, s) => {
        const op = order[next];
        return op ? [`stage ${s} at ${op.kind}${op.micro}`] : [];
      });
      throw new Error(`pipeline schedule "${schedule}" deadlocked: ${stuck.join(', ')}`);
    }
  }

  const stageEnd = states.map((state, s) => state.free + (optimizerSeconds[s] ?? 0));
  const busySeconds = states.map((state, s) => state.busy + (optimizerSeconds[s] ?? 0));
  const stepSeconds = Math.max(...stageEnd);
  const totalBusy = busySeconds.reduce((a, b) => a + b, 0);
  const bubbleFraction = stepSeconds > 0 ? 1 - totalBusy / (stages * stepSeconds) : 0;
  const peakInFlight = states.map((state) => state.peakInFlight);
  return { stepSeconds, busySeconds, bubbleFraction, peakInFlight, timeline };
}

/**
 * Bytes that cross the pipeline's links in one step: (S−1) hops × M micro-batches × 2
 * (activations forward, their gradients backward) × microBatch×T×C values × bytesPerValue
 * (4 for f32, 2 for bf16).
 */
export function activationBytesPerStep(o: {
  stages: number;
  micros: number;
  microBatch: number;
  seqLen: number;
  channels: number;
  bytesPerValue: 2 | 4;
}): number {
  for (const field of ['stages', 'micros', 'microBatch', 'seqLen', 'channels'] as const) requireCount(field, o[field]);
  if (o.bytesPerValue !== 2 && o.bytesPerValue !== 4)
    throw new RangeError(`bytesPerValue must be 2 or 4, got ${o.bytesPerValue}`);
  return (o.stages - 1) * o.micros * 2 * o.microBatch * o.seqLen * o.channels * o.bytesPerValue;
}

/** The textbook bubble (S−1)/(M+S−1) for equal stage times and free links. */
export function idealBubble(stages: number, micros: number): number {
  requireCount('stages', stages);
  requireCount('micros', micros);
  return (stages - 1) / (micros + stages - 1);
}

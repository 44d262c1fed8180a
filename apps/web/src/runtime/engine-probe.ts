/**
 * The engine probe: which engine trains faster in this browser, the CPU (WebAssembly SIMD) or
 * WebGPU, measured rather than assumed. A software adapter (SwiftShader) passes every WebGPU
 * check yet trains about a hundred times slower than the CPU engine of the same machine.
 *
 * Each engine runs in a worker of its own (engine-probe.worker.ts) on the model the room trains:
 * a warm-up step, then timed steps of forward, backward and AdamW on random tokens, until the
 * estimate is steady or the time budget is spent. A step that outlasts the cap is not waited for:
 * the worker is terminated and the engine counts as slower than that step allowed. The engines
 * run one after the other, so they do not compete for the cores. Results are kept in
 * localStorage for a while, so a reload does not measure again.
 *
 * ProbeTally holds the arithmetic (what the step times say, when to stop), without workers or
 * clocks, so it is tested on its own.
 */
import { z } from 'zod';

export type Engine = 'cpu' | 'webgpu';

/** What the page asks one probe worker: the room's preset, and its batch and sequence where known. */
export interface ProbeRequest {
  engine: Engine;
  preset: string;
  batch?: number;
  seq?: number;
}

/** What a probe worker posts: its device, that its engine is built, a step's time, or why it cannot train. */
export type ProbeWorkerOut =
  | { type: 'device'; adapter: string; software: boolean }
  | { type: 'ready'; tokensPerStep: number }
  | { type: 'step'; ms: number }
  | { type: 'error'; message: string };

export const PROBE_LIMITS = {
  /** Steps not timed: the first compiles code (WebAssembly, GPU pipelines) and fills caches. */
  warmupSteps: 1,
  /** Recent timed steps (the later half of them) before the estimate may be called steady. */
  minSteps: 3,
  /** Steady: the recent steps' mean time has a standard error of at most this fraction of it. */
  steadyError: 0.05,
  /** An engine under this fraction of the other's measured speed is clearly slower: one timed step says so. */
  clearlySlower: 0.5,
  /** Time for the steps (warm-up included) after which the estimate stands as it is. */
  budgetMs: 3_000,
  /** Past the budget with no timed step yet: how long the step in progress is waited for at most. */
  capMs: 6_000,
  /** Building the engine (kernels, buffers) longer than this: too slow to be worth it (SwiftShader takes 9 s). */
  buildMs: 20_000,
  /** How long a result is reused. */
  keepMs: 30 * 60_000,
} as const;
export type ProbeLimits = { [K in keyof typeof PROBE_LIMITS]: number };

const measureSchema = z.discriminatedUnion('kind', [
  /** Timed steps: tokens per second over them. */
  z.object({
    kind: z.literal('measured'),
    tokensPerSecond: z.number().positive(),
    steps: z.int().min(1),
    adapter: z.string(),
    software: z.boolean(),
  }),
  /**
   * Too slow to wait for: a step ran past the cap (tokensPerSecond is then an upper bound), or
   * building the engine did (no bound). `why` says which, in words.
   */
  z.object({
    kind: z.literal('slower'),
    tokensPerSecond: z.number().positive().nullable(),
    why: z.string(),
    adapter: z.string(),
    software: z.boolean(),
  }),
  z.object({ kind: z.literal('unavailable'), reason: z.string() }),
]);
export type EngineMeasure = z.infer<typeof measureSchema>;

const probeSchema = z.object({
  key: z.string(),
  measuredAt: z.number(),
  cpu: measureSchema,
  webgpu: measureSchema,
});
/** Both engines, measured on one model. */
export type EngineProbe = z.infer<typeof probeSchema>;

/** Tokens per second over the timed steps: all their tokens over all their time. */
export function throughput(tokensPerStep: number, stepsMs: readonly number[]): number {
  const total = stepsMs.reduce((sum, ms) => sum + ms, 0);
  return total > 0 ? (tokensPerStep * stepsMs.length * 1000) / total : Number.POSITIVE_INFINITY;
}

/** The standard error of the mean step time, as a fraction of the mean (Infinity below two steps). */
export function relativeError(stepsMs: readonly number[]): number {
  const n = stepsMs.length;
  if (n < 2) return Number.POSITIVE_INFINITY;
  const mean = stepsMs.reduce((sum, ms) => sum + ms, 0) / n;
  const variance = stepsMs.reduce((sum, ms) => sum + (ms - mean) ** 2, 0) / (n - 1);
  return mean > 0 ? Math.sqrt(variance / n) / mean : 0;
}

/**
 * The steps an estimate is made of: the later half of the timed ones. The first steps after the
 * warm-up still run slower (caches, the JIT), and would hold the estimate down for seconds.
 */
export function recentSteps(timed: readonly number[]): number[] {
  return timed.slice(Math.floor(timed.length / 2));
}

/**
 * One engine's measurement as its events come in (`at`: ms on any one clock): `verdict(at)` is
 * null while it should go on, else what it found. `rival`: the other engine's measured tokens/s,
 * once known, so an engine far slower than it is not measured for long.
 */
export class ProbeTally {
  private readyAt: number | null = null;
  private lastEventAt: number;
  private tokensPerStep = 0;
  private adapter = '';
  private software = false;
  private readonly stepsMs: number[] = [];
  private error: string | null = null;

  constructor(
    startedAt: number,
    private readonly limits: ProbeLimits = PROBE_LIMITS,
    private readonly rival: number | null = null,
  ) {
    this.lastEventAt = startedAt;
  }

  /** The engine's device is open: building starts now. */
  device(info: { adapter: string; software: boolean }, at: number): void {
    this.lastEventAt = at;
    this.adapter = info.adapter;
    this.software = info.software;
  }

  ready(tokensPerStep: number, at: number): void {
    this.readyAt = at;
    this.lastEventAt = at;
    this.tokensPerStep = tokensPerStep;
  }

  step(ms: number, at: number): void {
    this.stepsMs.push(ms);
    this.lastEventAt = at;
  }

  failed(message: string): void {
    this.error ??= message;
  }

  /** The timed steps' durations (after the warm-up). */
  get timed(): number[] {
    return this.stepsMs.slice(this.limits.warmupSteps);
  }

  /** When verdict() may change without a new event: the next deadline, in the events' clock. */
  nextDeadline(): number {
    if (this.readyAt === null) return this.lastEventAt + this.limits.buildMs;
    const budgetEnd = this.readyAt + this.limits.budgetMs;
    return this.timed.length > 0 ? budgetEnd : Math.max(budgetEnd, this.readyAt + this.limits.capMs);
  }

  verdict(at: number): EngineMeasure | null {
    if (this.error !== null) return { kind: 'unavailable', reason: this.error };
    const seen = { adapter: this.adapter, software: this.software };
    if (this.readyAt === null) {
      if (at - this.lastEventAt < this.limits.buildMs) return null;
      const seconds = Math.round(this.limits.buildMs / 1000);
      return { kind: 'slower', tokensPerSecond: null, why: `building it took over ${seconds} s`, ...seen };
    }
    const timed = this.timed;
    const recent = recentSteps(timed);
    const measured = (): EngineMeasure => ({
      kind: 'measured',
      tokensPerSecond: throughput(this.tokensPerStep, recent),
      steps: recent.length,
      ...seen,
    });
    if (recent.length >= this.limits.minSteps && relativeError(recent) <= this.limits.steadyError) return measured();
    const clearlySlower = this.rival !== null && this.rival * this.limits.clearlySlower;
    if (clearlySlower && timed.length > 0 && throughput(this.tokensPerStep, recent) < clearlySlower) return measured();
    const spent = at - this.readyAt;
    if (spent < this.limits.budgetMs) return null;
    if (timed.length > 0) return measured();
    if (spent < this.limits.capMs) return null;
    // no timed step in time: the step in progress has run this long, so a step takes at least that
    const running = Math.max(1, at - this.lastEventAt);
    return {
      kind: 'slower',
      tokensPerSecond: (this.tokensPerStep * 1000) / running,
      why: `one step took over ${(running / 1000).toFixed(1)} s`,
      ...seen,
    };
  }
}

/** The engine that trains faster; null when neither can. A bound counts as its value: the other engine beats it or not. */
export function pickEngine(probe: Pick<EngineProbe, 'cpu' | 'webgpu'>): Engine | null {
  const speed = (m: EngineMeasure) => (m.kind === 'unavailable' ? -1 : (m.tokensPerSecond ?? 0));
  const cpu = speed(probe.cpu);
  const gpu = speed(probe.webgpu);
  if (cpu < 0 && gpu < 0) return null;
  return gpu > cpu ? 'webgpu' : 'cpu';
}

/** A chosen engine this many times slower than the other gets a warning (slowChoiceText). */
export const SLOW_CHOICE_FACTOR = 3;

/**
 * The warning for choosing the engine that measured several times slower than the other, with
 * both figures; null when the choice is not much slower, or either figure is unknown.
 */
export function slowChoiceText(probe: Pick<EngineProbe, 'cpu' | 'webgpu'>, chosen: Engine): string | null {
  const other: Engine = chosen === 'cpu' ? 'webgpu' : 'cpu';
  const mine = probe[chosen];
  const theirs = probe[other];
  if (theirs.kind !== 'measured' || mine.kind === 'unavailable') return null;
  const speed = mine.tokensPerSecond;
  if (speed !== null && speed * SLOW_CHOICE_FACTOR > theirs.tokensPerSecond) return null;
  const times = speed === null ? null : Math.round(theirs.tokensPerSecond / speed);
  return (
    `The ${engineLabel(chosen, mine)} ${mine.kind === 'measured' ? 'measured' : 'was'} ${measureText(mine)} here, ` +
    `the ${engineLabel(other, theirs)} ` +
    `${measureText(theirs)}${times === null ? '' : `: about ${times.toLocaleString('en-US')}× slower`}. ` +
    'The room trains less with it, and leaves a volunteer far slower than the others out of its rounds.'
  );
}

/** A speed as a person reads it: two significant digits ("about 30,000 tokens/s"). */
export function roughRate(tokensPerSecond: number): string {
  const digits = Math.max(0, Math.floor(Math.log10(Math.max(1, tokensPerSecond))) - 1);
  const rounded = Math.round(tokensPerSecond / 10 ** digits) * 10 ** digits;
  return `${rounded.toLocaleString('en-US')} tokens/s`;
}

/** One engine's result in words: "about 30,000 tokens/s", "slower than about 1,700 tokens/s (…)". */
export function measureText(measure: EngineMeasure): string {
  switch (measure.kind) {
    case 'measured':
      return `about ${roughRate(measure.tokensPerSecond)}`;
    case 'slower':
      return measure.tokensPerSecond === null
        ? `too slow to measure (${measure.why})`
        : `slower than about ${roughRate(measure.tokensPerSecond)} (${measure.why})`;
    case 'unavailable':
      return `unavailable (${measure.reason})`;
  }
}

/** The name of an engine as the page says it, with the adapter (whose name says software or hardware). */
export function engineLabel(engine: Engine, measure?: EngineMeasure): string {
  if (engine === 'cpu') return 'CPU';
  return !measure || measure.kind === 'unavailable' || !measure.adapter ? 'GPU' : `GPU (${measure.adapter})`;
}

export const probeKeyOf = (request: Omit<ProbeRequest, 'engine'>): string =>
  `${request.preset}:${request.batch ?? 'default'}x${request.seq ?? 'default'}`;

const STORAGE_PREFIX = 'shoal.engine-probe:';

/** A kept result for this model, if it is recent (and well-formed: storage is anyone's to edit). */
export function readKeptProbe(storage: Pick<Storage, 'getItem'>, key: string, now: number): EngineProbe | null {
  let kept: unknown;
  try {
    kept = JSON.parse(storage.getItem(STORAGE_PREFIX + key) ?? 'null');
  } catch {
    return null;
  }
  const parsed = probeSchema.safeParse(kept);
  if (!parsed.success || parsed.data.key !== key) return null;
  const age = now - parsed.data.measuredAt;
  return age >= 0 && age < PROBE_LIMITS.keepMs ? parsed.data : null;
}

export function keepProbe(storage: Pick<Storage, 'setItem'>, probe: EngineProbe): void {
  try {
    storage.setItem(STORAGE_PREFIX + probe.key, JSON.stringify(probe));
  } catch {
    // storage full or refused (a private window): the next page measures again
  }
}

/**
 * The longest one engine's measurement can take, ms: building it (the verdict comes at buildMs if
 * it is not built by then), then the step in progress waited for up to capMs.
 */
export function probeMaxMs(limits: Pick<ProbeLimits, 'buildMs' | 'capMs'> = PROBE_LIMITS): number {
  return limits.buildMs + limits.capMs;
}

/** What the page shows while measuring: which engine, since when, and the CPU's result once known. */
export interface ProbeProgress {
  engine: Engine;
  startedAt: number;
  cpu?: EngineMeasure;
}

/**
 * Measures one engine in its own worker (`rival`: the other engine's tokens/s, when measured); the
 * worker is gone when this settles.
 */
export function measureEngine(request: ProbeRequest, signal?: AbortSignal, rival?: number): Promise<EngineMeasure> {
  return new Promise((resolve) => {
    const worker = new Worker(new URL('./engine-probe.worker.ts', import.meta.url), {
      type: 'module',
      name: `shoal-probe-${request.engine}`,
    });
    const tally = new ProbeTally(performance.now(), PROBE_LIMITS, rival ?? null);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (measure: EngineMeasure) => {
      clearTimeout(timer);
      worker.terminate();
      signal?.removeEventListener('abort', aborted);
      resolve(measure);
    };
    const aborted = () => finish({ kind: 'unavailable', reason: 'measuring was cancelled' });
    const decide = () => {
      const now = performance.now();
      const verdict = tally.verdict(now);
      if (verdict) return finish(verdict);
      clearTimeout(timer);
      timer = setTimeout(decide, Math.max(0, tally.nextDeadline() - now) + 1);
    };
    worker.addEventListener('message', (event: MessageEvent<ProbeWorkerOut>) => {
      const message = event.data;
      const now = performance.now();
      if (message.type === 'device') tally.device(message, now);
      else if (message.type === 'ready') tally.ready(message.tokensPerStep, now);
      else if (message.type === 'step') tally.step(message.ms, now);
      else tally.failed(message.message);
      decide();
    });
    worker.addEventListener('error', (event) => {
      tally.failed(event.message || 'the probe worker failed to start');
      decide();
    });
    if (signal?.aborted) return aborted();
    signal?.addEventListener('abort', aborted);
    worker.postMessage(request);
    decide();
  });
}

/**
 * Both engines for this model, the CPU first, then WebGPU where the browser has it (`gpuReason`:
 * why not, when it has none); a recent kept result is returned at once.
 */
export async function probeEngines(
  request: Omit<ProbeRequest, 'engine'>,
  options: { gpuReason?: string | null; signal?: AbortSignal; onProgress?(progress: ProbeProgress): void } = {},
): Promise<EngineProbe> {
  const key = probeKeyOf(request);
  const kept = readKeptProbe(localStorage, key, Date.now());
  if (kept) return kept;
  options.onProgress?.({ engine: 'cpu', startedAt: Date.now() });
  const cpu = await measureEngine({ ...request, engine: 'cpu' }, options.signal);
  let webgpu: EngineMeasure;
  if (options.gpuReason) webgpu = { kind: 'unavailable', reason: options.gpuReason };
  else {
    options.onProgress?.({ engine: 'webgpu', startedAt: Date.now(), cpu });
    const rival = cpu.kind === 'measured' ? cpu.tokensPerSecond : undefined;
    webgpu = await measureEngine({ ...request, engine: 'webgpu' }, options.signal, rival);
  }
  const probe: EngineProbe = { key, measuredAt: Date.now(), cpu, webgpu };
  if (!options.signal?.aborted) keepProbe(localStorage, probe);
  return probe;
}

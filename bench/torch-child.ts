/**
 * The PyTorch competitor as a long-lived child process (bench/torch_step.py), one per thread
 * count, spoken to in JSON lines: set up a model once per shape, then run N steps per request,
 * so alternating engines never pays Python's start-up. Every reply is checked here before use.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { GptConfig } from '../packages/model/src/config.ts';
import type { ParamLayout } from '../packages/model/src/layout.ts';
import type { TrainConfig } from '../packages/model/src/train-config.ts';

export const TORCH_SCRIPT = fileURLToPath(new URL('./torch_step.py', import.meta.url));

export const TORCH_INSTALL_HINT =
  'PyTorch not found (tried: %s): on Debian, apt-get install -y python3-torch libopenblas0-openmp ' +
  '(or --python /path/to/python3 with torch); going on without it';

/** Pythons to try, in order: --python or SHOAL_PYTHON if given, else PATH's python3 and Debian's. */
export function pythonCandidates(explicit?: string, env: NodeJS.ProcessEnv = process.env): string[] {
  if (explicit) return [explicit];
  if (env.SHOAL_PYTHON) return [env.SHOAL_PYTHON];
  return ['python3', '/usr/bin/python3'];
}

export interface TorchHello {
  torch: string;
  python: string;
  executable: string;
  threads: number;
  /** The BLAS library the process mapped, or null when none was found (a slow reference build). */
  blas: string | null;
  /** 'cpu', or the CUDA device's name (`--device cuda`); absent from older scripts. */
  device?: string;
}

export type TorchDevice = 'cpu' | 'cuda';
/** fp32 with TF32 off, TF32 matmuls, or bf16 autocast (the last two on cuda only). */
export type TorchPrecision = 'fp32' | 'tf32' | 'bf16';

/** One `run` request's answer: per step, wall and process-CPU milliseconds and the loss. */
export interface StepSamples {
  ms: number[];
  cpuMs: number[];
  losses: number[];
}

export type TorchReply =
  | { kind: 'hello'; hello: TorchHello }
  | { kind: 'missing-torch'; error: string }
  | { kind: 'error'; error: string }
  | { kind: 'setup'; parameters: number }
  | { kind: 'run'; samples: StepSamples }
  | { kind: 'flops'; flops: number | null }
  | { kind: 'grads'; loss: number; gradsFile: string }
  | { kind: 'precision'; precision: TorchPrecision };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function numbers(value: unknown, what: string, length?: number): number[] {
  if (!Array.isArray(value) || !value.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw new Error(`torch_step.py: ${what} is not a list of finite numbers`);
  }
  if (length !== undefined && value.length !== length) {
    throw new Error(`torch_step.py: ${what} has ${value.length} values, expected ${length}`);
  }
  return value;
}

/** Parses and checks one line from torch_step.py; throws naming what is wrong. */
export function parseTorchReply(line: string): TorchReply {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    throw new Error(`torch_step.py printed a line that is not JSON: ${line.slice(0, 200)}`);
  }
  if (!isRecord(message) || typeof message.ok !== 'boolean') {
    throw new Error(`torch_step.py: a reply without ok: ${line.slice(0, 200)}`);
  }
  if (!message.ok) {
    const error = typeof message.error === 'string' ? message.error : 'unknown error';
    return message.missingTorch === true ? { kind: 'missing-torch', error } : { kind: 'error', error };
  }
  if ('hello' in message) {
    const h = message.hello;
    if (
      !isRecord(h) ||
      typeof h.torch !== 'string' ||
      typeof h.python !== 'string' ||
      typeof h.executable !== 'string' ||
      !Number.isInteger(h.threads) ||
      (h.threads as number) < 1 ||
      !(h.blas === null || typeof h.blas === 'string')
    ) {
      throw new Error(`torch_step.py: malformed hello: ${line.slice(0, 200)}`);
    }
    return { kind: 'hello', hello: h as unknown as TorchHello };
  }
  if ('parameters' in message) {
    const parameters = message.parameters;
    if (!Number.isInteger(parameters) || (parameters as number) < 1) {
      throw new Error(`torch_step.py: parameters ${String(parameters)} is not a positive integer`);
    }
    return { kind: 'setup', parameters: parameters as number };
  }
  if ('ms' in message) {
    const ms = numbers(message.ms, 'ms');
    if (ms.length === 0) throw new Error('torch_step.py: a run with no steps');
    return {
      kind: 'run',
      samples: {
        ms,
        cpuMs: numbers(message.cpuMs, 'cpuMs', ms.length),
        losses: numbers(message.losses, 'losses', ms.length),
      },
    };
  }
  if ('precision' in message) {
    const { precision } = message;
    if (precision !== 'fp32' && precision !== 'tf32' && precision !== 'bf16') {
      throw new Error(`torch_step.py: unknown precision ${String(precision)}`);
    }
    return { kind: 'precision', precision };
  }
  if ('gradsFile' in message) {
    const { loss, gradsFile } = message;
    if (typeof loss !== 'number' || !Number.isFinite(loss) || typeof gradsFile !== 'string') {
      throw new Error(`torch_step.py: malformed grads reply: ${line.slice(0, 200)}`);
    }
    return { kind: 'grads', loss, gradsFile };
  }
  if ('flops' in message) {
    const flops = message.flops;
    if (!(flops === null || (typeof flops === 'number' && Number.isFinite(flops) && flops > 0))) {
      throw new Error(`torch_step.py: flops ${String(flops)} is neither null nor a positive number`);
    }
    return { kind: 'flops', flops };
  }
  throw new Error(`torch_step.py: a reply of no known kind: ${line.slice(0, 200)}`);
}

/** Little-endian bytes of a typed array as base64 (what torch_step.py decodes with frombuffer). */
export function toBase64(array: Float32Array | Int32Array): string {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength).toString('base64');
}

export interface TorchSetup {
  config: GptConfig;
  layout: ParamLayout;
  B: number;
  T: number;
  params: Float32Array;
  batches: { inputs: Int32Array; targets: Int32Array }[];
  train: TrainConfig;
  lr: number;
  /**
   * Where `params` were written as raw float32 (writeParamsFile): sent instead of their base64,
   * which for models of ~100M parameters would not fit in one JSON line.
   */
  paramsFile?: string;
  precision?: TorchPrecision;
  attention?: 'explicit' | 'sdpa';
}

/** Writes a flat float32 (or int32) vector's little-endian bytes to `path`, for paramsFile. */
export function writeParamsFile(path: string, params: Float32Array): string {
  writeFileSync(path, new Uint8Array(params.buffer, params.byteOffset, params.byteLength));
  return path;
}

/** One batch's float64 loss and gradients from the child (op grads); the gradients come back in a file. */
export interface TorchGradsRequest {
  config: GptConfig;
  layout: ParamLayout;
  B: number;
  T: number;
  params: Float32Array;
  paramsFile?: string;
  inputs: Int32Array;
  targets: Int32Array;
  gradsFile: string;
}

function paramsFields(layout: ParamLayout, params: Float32Array, paramsFile: string | undefined) {
  if (params.length !== layout.size) {
    throw new RangeError(`params have ${params.length} values, the layout needs ${layout.size}`);
  }
  return {
    tensors: layout.tensors.map(({ name, shape, offset }) => ({ name, shape, offset })),
    ...(paramsFile ? { paramsFile } : { params: toBase64(params) }),
  };
}

/** The setup request: the layout's names, shapes and offsets let the child check its model against ours. */
export function setupRequest(setup: TorchSetup): Record<string, unknown> {
  const { config, layout, B, T, params, batches, train, lr, paramsFile, precision, attention } = setup;
  return {
    op: 'setup',
    config,
    B,
    T,
    ...paramsFields(layout, params, paramsFile),
    ...(precision ? { precision } : {}),
    ...(attention ? { attention } : {}),
    batches: batches.map((b) => ({ inputs: toBase64(b.inputs), targets: toBase64(b.targets) })),
    train: {
      beta1: train.beta1,
      beta2: train.beta2,
      eps: train.eps,
      weightDecay: train.weightDecay,
      gradClip: train.gradClip,
    },
    lr,
  };
}

export function gradsRequest(request: TorchGradsRequest): Record<string, unknown> {
  const { config, layout, B, T, params, paramsFile, inputs, targets, gradsFile } = request;
  for (const [name, tokens] of [
    ['inputs', inputs],
    ['targets', targets],
  ] as const) {
    if (tokens.length !== B * T) throw new RangeError(`${name} have ${tokens.length} tokens, B·T is ${B * T}`);
  }
  return {
    op: 'grads',
    config,
    B,
    T,
    ...paramsFields(layout, params, paramsFile),
    inputs: toBase64(inputs),
    targets: toBase64(targets),
    gradsFile,
  };
}

/** One torch_step.py process: requests go one at a time, each answered by one line. */
export class TorchChild {
  private readonly waiting: ((line: string | Error) => void)[] = [];
  private exited: Error | null = null;

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly lines: Interface,
    readonly hello: TorchHello,
  ) {
    this.lines.on('line', (line) => this.waiting.shift()?.(line));
    this.child.once('close', (code, signal) => {
      this.exited = new Error(`torch_step.py exited (code ${code}, signal ${signal})`);
      for (const resolve of this.waiting.splice(0)) resolve(this.exited);
    });
  }

  /** Starts `python` on the script; resolves `missing` (with why) where that Python has no torch or does not run. */
  static async start(
    python: string,
    threads: number,
    script = TORCH_SCRIPT,
    device: TorchDevice = 'cpu',
  ): Promise<{ child: TorchChild } | { missing: string }> {
    const args = [script, '--threads', String(threads), ...(device === 'cpu' ? [] : ['--device', device])];
    const child = spawn(python, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stderr.on('data', (chunk: Buffer) => process.stderr.write(`[torch ${threads}t] ${chunk}`));
    const lines = createInterface({ input: child.stdout });
    const first = await new Promise<string | Error>((resolve) => {
      lines.once('line', resolve);
      child.once('error', resolve); // ENOENT: no such Python
      // 'close', not 'exit': stdout is read to its end first, so a last line is never lost.
      child.once('close', (code) => resolve(new Error(`${python} exited with code ${code} before saying hello`)));
    });
    if (first instanceof Error) {
      child.kill();
      return { missing: `${python}: ${first.message}` };
    }
    let reply: TorchReply;
    try {
      reply = parseTorchReply(first);
    } catch (error) {
      child.kill();
      throw error;
    }
    if (reply.kind !== 'hello') {
      child.kill();
      if (reply.kind === 'missing-torch') return { missing: `${python}: ${reply.error}` };
      throw new Error(`torch_step.py (${python}) did not start: ${'error' in reply ? reply.error : reply.kind}`);
    }
    return { child: new TorchChild(child, lines, reply.hello) };
  }

  private async request(message: Record<string, unknown>): Promise<TorchReply> {
    if (this.exited) throw this.exited;
    const answer = new Promise<string | Error>((resolve) => this.waiting.push(resolve));
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
    const line = await answer;
    if (line instanceof Error) throw line;
    const reply = parseTorchReply(line);
    if (reply.kind === 'error' || reply.kind === 'missing-torch') {
      throw new Error(`torch_step.py (${message.op}): ${reply.error}`);
    }
    return reply;
  }

  async setup(setup: TorchSetup): Promise<void> {
    const reply = await this.request(setupRequest(setup));
    if (reply.kind !== 'setup' || reply.parameters !== setup.layout.size) {
      throw new Error(`torch_step.py set up ${JSON.stringify(reply)}, expected ${setup.layout.size} parameters`);
    }
  }

  async run(steps: number): Promise<StepSamples> {
    const reply = await this.request({ op: 'run', steps });
    if (reply.kind !== 'run' || reply.samples.ms.length !== steps) {
      throw new Error(`torch_step.py answered a run of ${steps} steps with ${JSON.stringify(reply).slice(0, 200)}`);
    }
    return reply.samples;
  }

  /** The same model and optimizer state, from the next run on in `precision` (cuda). */
  async setPrecision(precision: TorchPrecision): Promise<void> {
    const reply = await this.request({ op: 'precision', precision });
    if (reply.kind !== 'precision' || reply.precision !== precision) {
      throw new Error(`torch_step.py answered precision ${precision} with ${JSON.stringify(reply)}`);
    }
  }

  /** Float64 loss of one batch; its gradients (float64, layout order) are in the request's gradsFile. */
  async grads(request: TorchGradsRequest): Promise<number> {
    const reply = await this.request(gradsRequest(request));
    if (reply.kind !== 'grads') throw new Error(`torch_step.py answered grads with ${reply.kind}`);
    return reply.loss;
  }

  /** FLOPs of one more training step as PyTorch's profiler counts them; null where it counts none. */
  async flops(): Promise<number | null> {
    const reply = await this.request({ op: 'flops' });
    if (reply.kind !== 'flops') throw new Error(`torch_step.py answered flops with ${reply.kind}`);
    return reply.flops;
  }

  async close(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('close', () => resolve()));
    this.child.stdin.end(`${JSON.stringify({ op: 'quit' })}\n`);
    const timeout = setTimeout(() => this.child.kill(), 5000);
    await exited;
    clearTimeout(timeout);
  }
}

/** The first of `pythons` that runs torch_step.py with torch, or why none did. */
export async function startTorch(
  pythons: string[],
  threads: number,
  script = TORCH_SCRIPT,
  device: TorchDevice = 'cpu',
): Promise<{ child: TorchChild } | { missing: string[] }> {
  const missing: string[] = [];
  for (const python of pythons) {
    const started = await TorchChild.start(python, threads, script, device);
    if ('child' in started) return started;
    missing.push(started.missing);
  }
  return { missing };
}

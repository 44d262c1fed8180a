/**
 * The option parsers and shared options of `shoal`'s subcommands (program.ts): whole and decimal
 * numbers, ports, byte sizes, shard sizes, --backend and --threads, and the guard that turns a
 * UsageError into one line and exit code 1.
 */
import { availableParallelism } from 'node:os';
import { MAX_SHARD_BYTES, MIN_SHARD_BYTES } from '@shoal/data';
import { defaultCpuThreads, MAX_DEFAULT_CPU_THREADS } from '@shoal/model';
import { InvalidArgumentError, Option } from 'commander';
import { parseBytes } from './simulate.ts';
import { UsageError } from './usage.ts';

export const MIB = 1024 * 1024;

export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

/**
 * --threads' default: SHOAL_CPU_THREADS where set (scripts that run several workers on one
 * machine set it to 1), else every core here, at most MAX_DEFAULT_CPU_THREADS.
 */
export function defaultThreads(): { n: number; description: string } {
  const cores = defaultCpuThreads(availableParallelism());
  const fromEnv = process.env.SHOAL_CPU_THREADS;
  if (fromEnv !== undefined) {
    const n = Number(fromEnv);
    if (Number.isInteger(n) && n >= 1) return { n, description: 'SHOAL_CPU_THREADS' };
    console.error(`shoal: SHOAL_CPU_THREADS must be a positive integer, not "${fromEnv}": using ${cores}`);
  }
  return { n: cores, description: `every core here, at most ${MAX_DEFAULT_CPU_THREADS}` };
}

/** --threads, for the commands that can train on the CPU engine: defined once. */
export function threadsOption(fallback: { n: number; description: string }): Option {
  return new Option(
    '--threads <n>',
    'threads the CPU engine splits its kernels over (--backend cpu; results are the same on any count)',
  )
    .argParser(parsePositiveInt)
    .default(fallback.n, fallback.description);
}

export function parseBackend(value: string): 'webgpu' | 'cpu' {
  if (value !== 'webgpu' && value !== 'cpu') throw new InvalidArgumentError('expected webgpu or cpu');
  return value;
}

/** Runs a command; a UsageError (bad input) prints one line and exits 1, no stack trace. */
export function guarded<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  return async (...args: A) => {
    try {
      await action(...args);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      console.error(`shoal: ${error.message}`);
      process.exitCode = 1;
    }
  };
}

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new InvalidArgumentError('expected a port, 0–65535');
  return port;
}

/** A finite number for commander. */
export function parseNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError('expected a number');
  return n;
}

/** A byte size (512MB, 1.5GiB) for commander. */
export function parseByteSize(value: string): number {
  try {
    return parseBytes(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** A number > 0 for commander. */
export function parsePositive(value: string): number {
  const n = parseNumber(value);
  if (!(n > 0)) throw new InvalidArgumentError('expected a number > 0');
  return n;
}

/** A shard size in MiB, within the dataset format's bounds. */
export function parseShardMib(value: string): number {
  const bytes = Math.round(parseNumber(value) * MIB);
  if (!(bytes >= MIN_SHARD_BYTES && bytes <= MAX_SHARD_BYTES)) {
    throw new InvalidArgumentError(`expected ${MIN_SHARD_BYTES / MIB}–${MAX_SHARD_BYTES / MIB} MiB`);
  }
  return bytes / MIB;
}

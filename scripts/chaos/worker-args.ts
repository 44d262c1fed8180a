/**
 * The chaos-run worker's command line (worker.ts), read with commander like `shoal worker`: a room
 * id or join token is random base64url and may begin with `-` (`--token -x…`), which node:util's
 * parseArgs refuses as ambiguous. Commander hands a required option-argument over as it is.
 */
import { Command, InvalidArgumentError } from 'commander';

export interface ChaosWorkerArgs {
  server: string;
  room: string;
  token: string;
  delayMs: number;
  jitterMs: number;
  hostile: boolean;
  seed: number;
  rotateMs: number;
  /** Hostile behaviours (hostile.ts) to rotate through; all when absent. */
  behaviours?: string[];
}

function nonNegative(value: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number) || number < 0) {
    throw new InvalidArgumentError('a number ≥ 0 is expected');
  }
  return number;
}

/** Parses the arguments after the script's path (`process.argv.slice(2)`); throws on a bad one. */
export function parseChaosWorkerArgs(argv: readonly string[]): ChaosWorkerArgs {
  const program = new Command('chaos-worker')
    .exitOverride()
    .configureOutput({ writeErr: () => {} })
    .requiredOption('--server <url>', 'the Shoal server')
    .requiredOption('--room <id>', 'room id')
    .requiredOption('--token <token>', 'join token')
    .option('--delay-ms <ms>', 'delay of every message sent', nonNegative, 0)
    .option('--jitter-ms <ms>', 'up to this much more, at random', nonNegative, 0)
    .option('--hostile', 'rewrite messages by rotating hostile behaviours', false)
    .option('--seed <n>', 'seed of the delays and behaviours', nonNegative, 1)
    .option('--rotate-ms <ms>', 'time on each hostile behaviour', nonNegative, 20_000)
    .option('--behaviours <list>', 'comma-separated hostile behaviours (default: all)', (list: string) =>
      list.split(',').filter(Boolean),
    );
  program.parse([...argv], { from: 'user' });
  return program.opts<ChaosWorkerArgs>();
}

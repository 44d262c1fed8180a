/**
 * The chaos run's child processes: `shoal` commands (apps/cli/bin/shoal.mjs) and the chaos worker
 * entry (worker.ts, through tsx and the CLI's `?raw` loader, as the bench scripts run). Every line
 * a child prints on stdout is kept with the time it arrived; JSON lines are parsed, others kept
 * as text. stderr is kept (the last 64 KiB) for failure reports.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SHOAL = fileURLToPath(new URL('../../apps/cli/bin/shoal.mjs', import.meta.url));
const REGISTER_RAW = pathToFileURL(fileURLToPath(new URL('../../bench/register-raw.mjs', import.meta.url))).href;
const CHAOS_WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

const STDERR_KEPT = 64 * 1024;

export interface Line {
  /** ms since the run started (the harness's clock). */
  at: number;
  /** The parsed JSON object, or null for a line that is not JSON. */
  json: Record<string, unknown> | null;
  text: string;
}

export interface Proc {
  name: string;
  child: ChildProcess;
  lines: Line[];
  stderr: string;
  /** Resolves once the process exited and its stdout was read to the end (null: killed by a signal). */
  exit: Promise<number | null>;
  /** Calls `listener` for every later line (and none of the earlier ones). */
  onLine(listener: (line: Line) => void): void;
  readonly running: boolean;
}

/** Starts `node ARGS…` in the repository root; `now()` stamps each line. */
function startNode(name: string, args: string[], now: () => number): Proc {
  // Every process of the run shares this machine: one CPU engine thread each.
  const env = { ...process.env, SHOAL_CPU_THREADS: '1' };
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env });
  const listeners: ((line: Line) => void)[] = [];
  const proc: Proc = {
    name,
    child,
    lines: [],
    stderr: '',
    exit: new Promise((resolve) => child.on('close', (code) => resolve(code))),
    onLine: (listener) => listeners.push(listener),
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
  };
  let buffered = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const texts = buffered.split('\n');
    buffered = texts.pop() ?? '';
    for (const text of texts) {
      if (!text.trim()) continue;
      let json: Record<string, unknown> | null = null;
      try {
        const parsed = JSON.parse(text);
        if (parsed && typeof parsed === 'object') json = parsed;
      } catch {
        // a text line (the server's banner)
      }
      const line = { at: now(), json, text };
      proc.lines.push(line);
      for (const listener of listeners) listener(line);
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    proc.stderr = (proc.stderr + chunk).slice(-STDERR_KEPT);
  });
  // a child that cannot start (ENOENT) ends like one that exited
  child.on('error', (error) => {
    proc.stderr += `\n${error.message}`;
  });
  return proc;
}

/** `shoal ARGS…` as a user runs it. */
export function startShoal(name: string, args: string[], now: () => number): Proc {
  return startNode(name, [SHOAL, ...args], now);
}

/** The chaos worker entry (worker.ts) with ARGS. */
export function startChaosWorker(name: string, args: string[], now: () => number): Proc {
  return startNode(name, ['--import', 'tsx', '--import', REGISTER_RAW, CHAOS_WORKER, ...args], now);
}

/** SIGKILL, then waits until it is gone; a process already gone is left alone. */
export async function kill(proc: Proc, signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
  if (proc.running) proc.child.kill(signal);
  return proc.exit;
}

/** SIGINT (a clean stop), then SIGKILL if it is still there after `graceMs`. */
export async function stop(proc: Proc, graceMs: number): Promise<number | null> {
  if (!proc.running) return proc.exit;
  proc.child.kill('SIGINT');
  const timer = setTimeout(() => proc.running && proc.child.kill('SIGKILL'), graceMs);
  const code = await proc.exit;
  clearTimeout(timer);
  return code;
}

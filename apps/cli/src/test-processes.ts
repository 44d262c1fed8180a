/**
 * The CLI's process tests (host-worker, host-crash, host-sigterm): `shoal` commands as child processes whose
 * stdout is JSON lines, a poll that fails naming what it waited for with every process's last
 * lines, and a cleanup that kills what is left.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

export type Line = Record<string, unknown>;

export interface Proc {
  name: string;
  child: ChildProcess;
  /** Parsed JSON lines of stdout, in order. */
  lines: Line[];
  /** The other lines of stdout (`shoal server`'s), in order. */
  text: string[];
  stderr: string[];
  /** Resolves once the process exited and its stdout was read to the end. */
  exit: Promise<number | null>;
}

/** A port free now on 127.0.0.1 (for a `shoal server` that must come back on the same one). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** What a `shoal` command that ran to its end printed, and its exit code. */
export interface ShoalRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `shoal ARGS…` to its end without blocking (so several cases run side by side), 60 s at most. */
export function runShoal(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ShoalRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [shoal, ...args], { timeout: 60_000, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

export const eventsOf = (p: Proc, event: string) => p.lines.filter((line) => line.event === event);

/** A set of `shoal` processes for one test file; `killAll` in its afterAll. */
export function shoalProcesses() {
  const procs: Proc[] = [];

  function start(name: string, args: string[]): Proc {
    // Several CLI processes share this machine: one CPU engine thread each.
    const env = { ...process.env, SHOAL_CPU_THREADS: '1' };
    const child = spawn(process.execPath, [shoal, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    const proc: Proc = {
      name,
      child,
      lines: [],
      text: [],
      stderr: [],
      // 'close', not 'exit': every line the process wrote before it died is parsed by then
      exit: new Promise((resolve) => child.on('close', (code) => resolve(code))),
    };
    let buffered = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('{')) proc.lines.push(JSON.parse(line));
        else if (line.trim()) proc.text.push(line);
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => proc.stderr.push(chunk));
    procs.push(proc);
    return proc;
  }

  /**
   * Polls `condition` every `everyMs`; fails naming `what`, with every process's last events, last
   * metrics line and stderr, after `timeoutMs`, or at once when a process exited by itself.
   */
  async function until<T>(
    condition: () => T | undefined | false,
    timeoutMs: number,
    what: string,
    everyMs = 50,
  ): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const value = condition();
      if (value) return value;
      for (const p of procs) {
        if (p.child.exitCode !== null && p.child.signalCode === null && !p.child.killed)
          throw new Error(
            `${p.name} exited (${p.child.exitCode}) while waiting for ${what}:\n` +
              `${p.lines
                .slice(-6)
                .map((line) => JSON.stringify(line))
                .join('\n')}\n${p.stderr.join('')}`,
          );
      }
      if (performance.now() > deadline) {
        const logs = procs
          .map((p) => {
            const events = p.lines.filter((line) => line.event !== 'metrics').slice(-6);
            const last = [...events, ...eventsOf(p, 'metrics').slice(-1)];
            return `--- ${p.name}\n${last.map((line) => JSON.stringify(line)).join('\n')}\n${p.stderr.join('').slice(-2000)}`;
          })
          .join('\n');
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${logs}`);
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }

  function killAll(): void {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  }

  return { start, until, killAll };
}

/**
 * The chaos run (issue 13): a real `shoal server`, `shoal host --json --checkpoint-dir` and
 * workers as child processes over WebRTC on loopback, while a seeded schedule SIGKILLs honest
 * workers (they rejoin a few seconds later, as new peers), SIGKILLs the host (its checkpoint is
 * loaded and checked, then `shoal host --resume` takes the room back) and makes the hostile
 * worker rejoin under a new id (the room benches a peer that misbehaves; a new id starts clean).
 *
 * Workers (--workers N): one hostile (worker.ts --hostile, its behaviour rotating), and N − 1
 * honest ones: --cli-workers of them plain `shoal worker --backend cpu` (undelayed; the CLI prints
 * no replica hashes), the others witnesses (worker.ts: the same joinRoomAsWorker, delayed links,
 * and a line per state its replica holds, which figures.ts compares with the host's).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkCheckpoint } from './checkpoint.ts';
import {
  type ChaosFigures,
  type ChaosRecord,
  computeFigures,
  type HostLife,
  type WorkerKind,
  type WorkerLife,
} from './figures.ts';
import { kill, type Proc, startChaosWorker, startShoal, stop } from './processes.ts';
import { between, pick, seededRandom } from './random.ts';

export interface ChaosOptions {
  minutes: number;
  seed: number;
  /** All workers, the hostile one included (≥ 2). */
  workers: number;
  /** Of the honest workers, how many are plain `shoal worker`s (the rest are witnesses). */
  cliWorkers: number;
  /** Inner steps between two rounds of a fragment: small, so rounds are frequent. */
  innerSteps: number;
  /** `shoal host --deadline-ms`: owners give up after this, the coordinator after twice that. */
  deadlineMs: number;
  /** The hostile worker's behaviours (hostile.ts names); all when omitted. */
  behaviours?: string[];
  /** Where to write every process's output at the end (DIR/NAME.log: seconds into the run, line), if anywhere. */
  logDir?: string;
  /** Progress lines (stderr in the CLI). */
  log?: (text: string) => void;
}

export const DEFAULT_CHAOS_OPTIONS: ChaosOptions = {
  minutes: 30,
  seed: 1,
  workers: 4,
  cliWorkers: 1,
  innerSteps: 16,
  deadlineMs: 8_000,
};

type ChaosEvent = { at: number; kind: 'kill-worker' | 'kill-host' | 'rejoin-hostile' };

/**
 * When what happens, from the seed: after a warm-up and before a quiet end, honest workers are
 * killed every 15–45 s, the host about every 5 minutes (at least once), the hostile worker
 * rejoins every 60–120 s.
 */
export function chaosSchedule(durationMs: number, random: () => number): ChaosEvent[] {
  const warmup = Math.min(20_000, 0.15 * durationMs);
  const end = durationMs - Math.min(20_000, 0.1 * durationMs);
  const schedule: ChaosEvent[] = [];
  for (let at = warmup + between(random, 5_000, 15_000); at < end; at += between(random, 15_000, 45_000))
    schedule.push({ at, kind: 'kill-worker' });
  const hostKills = Math.max(1, Math.round(durationMs / 300_000));
  const segment = (end - warmup) / hostKills;
  for (let i = 0; i < hostKills; i++)
    schedule.push({ at: warmup + segment * (i + between(random, 0.3, 0.7)), kind: 'kill-host' });
  for (let at = warmup + between(random, 30_000, 60_000); at < end; at += between(random, 60_000, 120_000))
    schedule.push({ at, kind: 'rejoin-hostile' });
  return schedule.sort((a, b) => a.at - b.at);
}

interface Slot {
  name: string;
  kind: WorkerKind;
  /** Per-message delay on its links (witnesses and the hostile worker). */
  delayMs: number;
  jitterMs: number;
  proc: Proc | null;
  life: WorkerLife | null;
  lives: number;
}

/** Each process's stdout lines (stamped with seconds into the run) and its stderr's tail, one file each. */
function writeLogs(logDir: string, procs: Proc[]): void {
  mkdirSync(logDir, { recursive: true });
  for (const proc of procs) {
    const lines = proc.lines.map((line) => `${(line.at / 1e3).toFixed(3)} ${line.text}`);
    writeFileSync(join(logDir, `${proc.name}.log`), `${lines.join('\n')}\n--- stderr (tail)\n${proc.stderr}`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every 100 ms; rejects naming `what` after `timeoutMs`. */
async function until<T>(condition: () => T | undefined | null | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

export async function runChaos(options: ChaosOptions): Promise<ChaosFigures> {
  const log = options.log ?? (() => {});
  const started = performance.now();
  const now = () => performance.now() - started;
  const clock = () => {
    const s = Math.floor(now() / 1e3);
    return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
  };
  const say = (text: string) => log(`[${clock()}] ${text}`);
  const random = seededRandom(options.seed);
  const durationMs = options.minutes * 60_000;
  const dir = mkdtempSync(join(tmpdir(), 'shoal-chaos-'));
  const record: ChaosRecord = {
    minutes: options.minutes,
    seed: options.seed,
    workers: options.workers,
    hosts: [],
    workerLives: [],
    checkpoints: [],
    actions: { workerKills: 0, workerRestarts: 0, hostKills: 0, hostRestarts: 0, hostileRejoins: 0 },
    reclaimed: 0,
    stopProblems: [],
    measuredUntil: Number.POSITIVE_INFINITY,
    elapsedMs: 0,
  };
  const procs: Proc[] = [];
  let stopping = false;
  const timers = new Set<Promise<unknown>>();
  const background = (work: Promise<unknown>) => {
    timers.add(work);
    void work.finally(() => timers.delete(work));
  };

  try {
    // --- the server ----------------------------------------------------------------------------
    const server = startShoal('server', ['server', '--port', '0', '--host', '127.0.0.1'], now);
    procs.push(server);
    const banner = await until(
      () => server.lines.find((line) => line.text.includes('http://')) ?? (!server.running && 'exited'),
      30_000,
      'the server',
    );
    if (banner === 'exited') throw new Error(`shoal server exited: ${server.stderr}`);
    const url = (/http:\/\/\S+/.exec(banner.text)?.[0] ?? '').replace('localhost', '127.0.0.1');

    // --- the host ------------------------------------------------------------------------------
    const reporting = [
      ...['--eval-batches', '2', '--eval-every-ms', '5000', '--metrics-every-ms', '2000'],
      ...['--publish-every-ms', '2000', '--deadline-ms', String(options.deadlineMs), '--json'],
    ];
    const training = [
      ...['--preset', 'nano', '--inner-steps', String(options.innerSteps), '--fragments', '2', '--batch', '2'],
      // a schedule no worker reaches in the run's minutes: `shoal host` ends at the schedule's last step
      ...['--steps', String(Math.max(1_000, 10_000 * options.minutes)), '--seed', String(options.seed)],
    ];
    let host: { proc: Proc; life: HostLife } | null = null;
    let room: { roomId: string; joinToken: string } | null = null;
    const startHost = async (resume: boolean) => {
      const args = ['host', '--server', url, ...(resume ? ['--resume', dir] : training), '--checkpoint-dir', dir];
      const proc = startShoal(`host#${record.hosts.length}`, [...args, ...reporting], now);
      procs.push(proc);
      const life: HostLife = { startedAt: now(), endedAt: null, ending: 'running', lines: proc.lines, stderrTail: '' };
      record.hosts.push(life);
      host = { proc, life };
      void proc.exit.then(() => {
        life.endedAt ??= now();
        life.stderrTail = proc.stderr.slice(-2_000);
        if (life.ending !== 'running') return;
        life.ending = 'crashed';
        say(`the host exited by itself: ${proc.stderr.trim().split('\n').slice(-3).join(' | ')}`);
        if (!stopping) background(restartHost(false));
      });
      const first = await until(
        () => proc.lines.find((line) => line.json?.event === 'room')?.json ?? (!proc.running && 'exited'),
        60_000,
        'the host’s room line',
      );
      if (first === 'exited') throw new Error(`shoal host exited: ${proc.stderr}`);
      if (!resume) room = { roomId: String(first.roomId), joinToken: String(first.joinToken) };
      else {
        const resumed = await until(
          () => proc.lines.find((line) => line.json?.event === 'resumed')?.json,
          30_000,
          'the resumed line',
        );
        if (resumed.reclaimed === true && first.roomId === room?.roomId) record.reclaimed++;
        else
          say(
            `the resumed host did not get room ${room?.roomId} back (${first.roomId}, reclaimed ${resumed.reclaimed})`,
          );
      }
    };

    /** SIGKILL the host, check the checkpoint it left, restart it with --resume. */
    const restartHost = async (killIt: boolean) => {
      const current = host as { proc: Proc; life: HostLife } | null;
      if (!current) return;
      const lifeIndex = record.hosts.indexOf(current.life);
      if (killIt) {
        current.life.ending = 'killed';
        record.actions.hostKills++;
        await kill(current.proc);
        current.life.endedAt = now();
      }
      const check = await checkCheckpoint(dir);
      record.checkpoints.push({ at: now(), when: 'host-killed', life: lifeIndex, check });
      say(
        `host ${killIt ? 'killed' : 'gone'}; its checkpoint ${check.ok ? 'loads' : `does NOT load: ${check.error}`} ` +
          `(rounds ${check.fragments.map((f) => f.round).join(', ')}, eval ${check.evalLoss?.toFixed(3)})`,
      );
      await sleep(between(random, 2_000, 6_000));
      if (stopping) return;
      record.actions.hostRestarts++;
      await startHost(true);
      say(`host resumed from ${dir}`);
    };

    await startHost(false);
    const joined = room as { roomId: string; joinToken: string } | null;
    if (!joined) throw new Error('no room');
    say(`server ${url}, room ${joined.roomId}, checkpoints in ${dir}`);

    // --- the workers ---------------------------------------------------------------------------
    const honest = options.workers - 1;
    const slots: Slot[] = [];
    for (let i = 0; i < honest; i++) {
      const cli = i < options.cliWorkers;
      slots.push({
        name: cli ? `cli-${i + 1}` : `witness-${i + 1 - options.cliWorkers}`,
        kind: cli ? 'cli' : 'witness',
        delayMs: cli ? 0 : Math.round(between(random, 10, 60)),
        jitterMs: cli ? 0 : 30,
        proc: null,
        life: null,
        lives: 0,
      });
    }
    slots.push({ name: 'hostile', kind: 'hostile', delayMs: 40, jitterMs: 40, proc: null, life: null, lives: 0 });

    const startWorker = (slot: Slot) => {
      const name = `${slot.name}#${slot.lives++}`;
      const joinArgs = ['--server', url, '--room', joined.roomId, '--token', joined.joinToken];
      const proc =
        slot.kind === 'cli'
          ? startShoal(name, ['worker', ...joinArgs, '--backend', 'cpu', '--json'], now)
          : startChaosWorker(
              name,
              [
                ...joinArgs,
                ...['--delay-ms', String(slot.delayMs), '--jitter-ms', String(slot.jitterMs)],
                ...['--seed', String(Math.floor(random() * 2 ** 31))],
                ...(slot.kind === 'hostile' ? ['--hostile', '--rotate-ms', '8000'] : []),
                ...(slot.kind === 'hostile' && options.behaviours
                  ? ['--behaviours', options.behaviours.join(',')]
                  : []),
              ],
              now,
            );
      procs.push(proc);
      const life: WorkerLife = {
        name,
        kind: slot.kind,
        startedAt: now(),
        endedAt: null,
        ending: 'running',
        lines: proc.lines,
        stderrTail: '',
      };
      record.workerLives.push(life);
      slot.proc = proc;
      slot.life = life;
      void proc.exit.then((code) => {
        life.endedAt ??= now();
        life.stderrTail = proc.stderr.slice(-2_000);
        if (life.ending !== 'running') return;
        life.ending = 'crashed';
        if (stopping) return;
        say(`${name} exited by itself (${code}): ${proc.stderr.trim().split('\n').slice(-2).join(' | ')}`);
        background(sleep(3_000).then(() => !stopping && startWorker(slot)));
      });
    };
    for (const slot of slots) {
      startWorker(slot);
      await sleep(1_000);
    }

    /** SIGKILL a worker's process; it comes back, as a new peer, `restartMs` later. */
    const killWorker = async (slot: Slot, restartMs: number) => {
      const { proc, life } = slot;
      if (!proc || !life || !proc.running) return;
      life.ending = 'killed';
      await kill(proc);
      life.endedAt = now();
      background(
        sleep(restartMs).then(() => {
          if (stopping) return;
          if (slot.kind !== 'hostile') record.actions.workerRestarts++;
          startWorker(slot);
        }),
      );
    };

    // --- chaos ---------------------------------------------------------------------------------
    const schedule = chaosSchedule(durationMs, random);
    say(
      `${schedule.length} chaos events over ${options.minutes} min: ` +
        ['kill-worker', 'kill-host', 'rejoin-hostile']
          .map((kind) => `${schedule.filter((e) => e.kind === kind).length} ${kind}`)
          .join(', '),
    );
    const progress = setInterval(() => {
      const hostLines = record.hosts.flatMap((h) => h.lines);
      const commits = hostLines.filter((line) => line.json?.event === 'round-committed').length;
      const aborts = hostLines.filter((line) => line.json?.event === 'round-aborted').length;
      const evalLoss = hostLines.filter((line) => line.json?.event === 'metrics').at(-1)?.json?.evalLoss;
      say(`${commits} commits, ${aborts} aborts, eval ${typeof evalLoss === 'number' ? evalLoss.toFixed(3) : '—'}`);
    }, 30_000);
    for (const event of schedule) {
      await sleep(Math.max(0, event.at - now()));
      if (event.kind === 'kill-host') await restartHost(true);
      else if (event.kind === 'rejoin-hostile') {
        const slot = slots.find((s) => s.kind === 'hostile') as Slot;
        record.actions.hostileRejoins++;
        await killWorker(slot, between(random, 1_000, 3_000));
        say('the hostile worker rejoins under a new id');
      } else {
        const alive = slots.filter((s) => s.kind !== 'hostile' && s.proc?.running);
        if (alive.length === 0) continue;
        const slot = pick(random, alive);
        const restartMs = between(random, 2_000, 8_000);
        record.actions.workerKills++;
        say(`SIGKILL ${slot.life?.name}; back in ${(restartMs / 1e3).toFixed(1)} s`);
        await killWorker(slot, restartMs);
      }
    }
    await sleep(Math.max(0, durationMs - now()));
    clearInterval(progress);

    // --- the end: measure up to here, then stop everyone cleanly --------------------------------
    while (timers.size > 0) await Promise.all([...timers]);
    record.measuredUntil = now();
    stopping = true;
    say('stopping: workers first, then the host');
    const stopOne = async (proc: Proc, life: { ending: string }, graceMs: number) => {
      life.ending = 'stopped';
      const code = await stop(proc, graceMs);
      if (code !== 0) record.stopProblems.push(`${proc.name} did not stop cleanly on SIGINT (exit ${code})`);
    };
    await Promise.all(slots.map((slot) => slot.proc && slot.life && stopOne(slot.proc, slot.life, 15_000)));
    const last = host as { proc: Proc; life: HostLife } | null;
    if (last) {
      await stopOne(last.proc, last.life, 20_000);
      last.life.endedAt = now();
      record.checkpoints.push({
        at: now(),
        when: 'end',
        life: record.hosts.length - 1,
        check: await checkCheckpoint(dir),
      });
    }
    await stop(server, 5_000);
  } finally {
    stopping = true;
    for (const proc of procs) if (proc.running) proc.child.kill('SIGKILL');
    await Promise.all(procs.map((proc) => proc.exit));
    rmSync(dir, { recursive: true, force: true });
    if (options.logDir) writeLogs(options.logDir, procs);
  }
  record.elapsedMs = now();
  return computeFigures(record);
}

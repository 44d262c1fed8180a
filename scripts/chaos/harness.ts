/**
 * The chaos run: a real `shoal server`, `shoal host --json --checkpoint-dir` and
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

/** The host's reporting flags, and the room's training flags (a fresh host's; a resumed one keeps its own). */
function hostArgs(options: ChaosOptions): { reporting: string[]; training: string[] } {
  return {
    reporting: [
      ...['--eval-batches', '2', '--eval-every-ms', '5000', '--metrics-every-ms', '2000'],
      ...['--publish-every-ms', '2000', '--deadline-ms', String(options.deadlineMs), '--json'],
    ],
    training: [
      ...['--preset', 'nano', '--inner-steps', String(options.innerSteps), '--fragments', '2', '--batch', '2'],
      // a schedule no worker reaches in the run's minutes: `shoal host` ends at the schedule's last step
      ...['--steps', String(Math.max(1_000, 10_000 * options.minutes)), '--seed', String(options.seed)],
    ],
  };
}

/** One chaos run: its processes, what they printed, and the chaos done to them. */
class ChaosRun {
  private readonly log: (text: string) => void;
  private readonly started = performance.now();
  private readonly random: () => number;
  private readonly durationMs: number;
  private readonly dir: string;
  private readonly record: ChaosRecord;
  private readonly procs: Proc[] = [];
  private stopping = false;
  private readonly timers = new Set<Promise<unknown>>();
  private url = '';
  private host: { proc: Proc; life: HostLife } | null = null;
  private room: { roomId: string; joinToken: string } | null = null;
  private readonly slots: Slot[] = [];

  constructor(private readonly options: ChaosOptions) {
    this.log = options.log ?? (() => {});
    this.random = seededRandom(options.seed);
    this.durationMs = options.minutes * 60_000;
    this.dir = mkdtempSync(join(tmpdir(), 'shoal-chaos-'));
    this.record = {
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
  }

  private now(): number {
    return performance.now() - this.started;
  }

  private say(text: string): void {
    const s = Math.floor(this.now() / 1e3);
    const clock = `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
    this.log(`[${clock}] ${text}`);
  }

  private background(work: Promise<unknown>): void {
    this.timers.add(work);
    void work.finally(() => this.timers.delete(work));
  }

  async run(): Promise<ChaosFigures> {
    try {
      const server = await this.startServer();
      await this.startHost(false);
      const joined = this.room as { roomId: string; joinToken: string } | null;
      if (!joined) throw new Error('no room');
      this.say(`server ${this.url}, room ${joined.roomId}, checkpoints in ${this.dir}`);
      await this.startWorkers();
      await this.runSchedule();
      await this.stopAll(server);
    } finally {
      this.stopping = true;
      for (const proc of this.procs) if (proc.running) proc.child.kill('SIGKILL');
      await Promise.all(this.procs.map((proc) => proc.exit));
      rmSync(this.dir, { recursive: true, force: true });
      if (this.options.logDir) writeLogs(this.options.logDir, this.procs);
    }
    this.record.elapsedMs = this.now();
    return computeFigures(this.record);
  }

  /** `shoal server` on a free port; its URL. */
  private async startServer(): Promise<Proc> {
    const server = startShoal('server', ['server', '--port', '0', '--host', '127.0.0.1'], () => this.now());
    this.procs.push(server);
    const banner = await until(
      () => server.lines.find((line) => line.text.includes('http://')) ?? (!server.running && 'exited'),
      30_000,
      'the server',
    );
    if (banner === 'exited') throw new Error(`shoal server exited: ${server.stderr}`);
    this.url = (/http:\/\/\S+/.exec(banner.text)?.[0] ?? '').replace('localhost', '127.0.0.1');
    return server;
  }

  /** A host life: a fresh room, or `--resume` from the checkpoint directory (taking the room back). */
  private async startHost(resume: boolean): Promise<void> {
    const { record } = this;
    const { reporting, training } = hostArgs(this.options);
    const args = ['host', '--server', this.url, ...(resume ? ['--resume', this.dir] : training)];
    const proc = startShoal(`host#${record.hosts.length}`, [...args, '--checkpoint-dir', this.dir, ...reporting], () =>
      this.now(),
    );
    this.procs.push(proc);
    const life: HostLife = {
      startedAt: this.now(),
      endedAt: null,
      ending: 'running',
      lines: proc.lines,
      stderrTail: '',
    };
    record.hosts.push(life);
    this.host = { proc, life };
    void proc.exit.then(() => {
      life.endedAt ??= this.now();
      life.stderrTail = proc.stderr.slice(-2_000);
      if (life.ending !== 'running') return;
      life.ending = 'crashed';
      this.say(`the host exited by itself: ${proc.stderr.trim().split('\n').slice(-3).join(' | ')}`);
      if (!this.stopping) this.background(this.restartHost(false));
    });
    const first = await until(
      () => proc.lines.find((line) => line.json?.event === 'room')?.json ?? (!proc.running && 'exited'),
      60_000,
      'the host’s room line',
    );
    if (first === 'exited') throw new Error(`shoal host exited: ${proc.stderr}`);
    if (!resume) this.room = { roomId: String(first.roomId), joinToken: String(first.joinToken) };
    else {
      const resumed = await until(
        () => proc.lines.find((line) => line.json?.event === 'resumed')?.json,
        30_000,
        'the resumed line',
      );
      if (resumed.reclaimed === true && first.roomId === this.room?.roomId) record.reclaimed++;
      else
        this.say(
          `the resumed host did not get room ${this.room?.roomId} back (${first.roomId}, reclaimed ${resumed.reclaimed})`,
        );
    }
  }

  /** SIGKILL the host, check the checkpoint it left, restart it with --resume. */
  private async restartHost(killIt: boolean): Promise<void> {
    const current = this.host;
    if (!current) return;
    const lifeIndex = this.record.hosts.indexOf(current.life);
    if (killIt) {
      current.life.ending = 'killed';
      this.record.actions.hostKills++;
      await kill(current.proc);
      current.life.endedAt = this.now();
    }
    const check = await checkCheckpoint(this.dir);
    this.record.checkpoints.push({ at: this.now(), when: 'host-killed', life: lifeIndex, check });
    this.say(
      `host ${killIt ? 'killed' : 'gone'}; its checkpoint ${check.ok ? 'loads' : `does NOT load: ${check.error}`} ` +
        `(rounds ${check.fragments.map((f) => f.round).join(', ')}, eval ${check.evalLoss?.toFixed(3)})`,
    );
    await sleep(between(this.random, 2_000, 6_000));
    if (this.stopping) return;
    this.record.actions.hostRestarts++;
    await this.startHost(true);
    this.say(`host resumed from ${this.dir}`);
  }

  /** The honest workers' slots (cli, then witnesses) and the hostile one's, each started a second apart. */
  private async startWorkers(): Promise<void> {
    const { options, random, slots } = this;
    const honest = options.workers - 1;
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
    for (const slot of slots) {
      this.startWorker(slot);
      await sleep(1_000);
    }
  }

  /** A new life of the slot's worker (a new peer); restarted 3 s after it exits by itself. */
  private startWorker(slot: Slot): void {
    const { options } = this;
    const joined = this.room as { roomId: string; joinToken: string };
    const now = () => this.now();
    const name = `${slot.name}#${slot.lives++}`;
    const joinArgs = ['--server', this.url, '--room', joined.roomId, '--token', joined.joinToken];
    const proc =
      slot.kind === 'cli'
        ? startShoal(name, ['worker', ...joinArgs, '--backend', 'cpu', '--json'], now)
        : startChaosWorker(
            name,
            [
              ...joinArgs,
              ...['--delay-ms', String(slot.delayMs), '--jitter-ms', String(slot.jitterMs)],
              ...['--seed', String(Math.floor(this.random() * 2 ** 31))],
              ...(slot.kind === 'hostile' ? ['--hostile', '--rotate-ms', '8000'] : []),
              ...(slot.kind === 'hostile' && options.behaviours ? ['--behaviours', options.behaviours.join(',')] : []),
            ],
            now,
          );
    this.procs.push(proc);
    const life: WorkerLife = {
      name,
      kind: slot.kind,
      startedAt: this.now(),
      endedAt: null,
      ending: 'running',
      lines: proc.lines,
      stderrTail: '',
    };
    this.record.workerLives.push(life);
    slot.proc = proc;
    slot.life = life;
    void proc.exit.then((code) => {
      life.endedAt ??= this.now();
      life.stderrTail = proc.stderr.slice(-2_000);
      if (life.ending !== 'running') return;
      life.ending = 'crashed';
      if (this.stopping) return;
      this.say(`${name} exited by itself (${code}): ${proc.stderr.trim().split('\n').slice(-2).join(' | ')}`);
      this.background(sleep(3_000).then(() => !this.stopping && this.startWorker(slot)));
    });
  }

  /** SIGKILL a worker's process; it comes back, as a new peer, `restartMs` later. */
  private async killWorker(slot: Slot, restartMs: number): Promise<void> {
    const { proc, life } = slot;
    if (!proc || !life || !proc.running) return;
    life.ending = 'killed';
    await kill(proc);
    life.endedAt = this.now();
    this.background(
      sleep(restartMs).then(() => {
        if (this.stopping) return;
        if (slot.kind !== 'hostile') this.record.actions.workerRestarts++;
        this.startWorker(slot);
      }),
    );
  }

  /** The seeded chaos schedule, event by event, with a progress line every 30 s, to the run's end. */
  private async runSchedule(): Promise<void> {
    const { record, random, slots, durationMs } = this;
    const schedule = chaosSchedule(durationMs, random);
    this.say(
      `${schedule.length} chaos events over ${this.options.minutes} min: ` +
        ['kill-worker', 'kill-host', 'rejoin-hostile']
          .map((kind) => `${schedule.filter((e) => e.kind === kind).length} ${kind}`)
          .join(', '),
    );
    const progress = setInterval(() => {
      const hostLines = record.hosts.flatMap((h) => h.lines);
      const commits = hostLines.filter((line) => line.json?.event === 'round-committed').length;
      const aborts = hostLines.filter((line) => line.json?.event === 'round-aborted').length;
      const evalLoss = hostLines.filter((line) => line.json?.event === 'metrics').at(-1)?.json?.evalLoss;
      this.say(
        `${commits} commits, ${aborts} aborts, eval ${typeof evalLoss === 'number' ? evalLoss.toFixed(3) : '—'}`,
      );
    }, 30_000);
    for (const event of schedule) {
      await sleep(Math.max(0, event.at - this.now()));
      if (event.kind === 'kill-host') await this.restartHost(true);
      else if (event.kind === 'rejoin-hostile') {
        const slot = slots.find((s) => s.kind === 'hostile') as Slot;
        record.actions.hostileRejoins++;
        await this.killWorker(slot, between(random, 1_000, 3_000));
        this.say('the hostile worker rejoins under a new id');
      } else {
        const alive = slots.filter((s) => s.kind !== 'hostile' && s.proc?.running);
        if (alive.length === 0) continue;
        const slot = pick(random, alive);
        const restartMs = between(random, 2_000, 8_000);
        record.actions.workerKills++;
        this.say(`SIGKILL ${slot.life?.name}; back in ${(restartMs / 1e3).toFixed(1)} s`);
        await this.killWorker(slot, restartMs);
      }
    }
    await sleep(Math.max(0, durationMs - this.now()));
    clearInterval(progress);
  }

  /** The end: measure up to here, then stop everyone cleanly (workers first, then the host). */
  private async stopAll(server: Proc): Promise<void> {
    const { record } = this;
    while (this.timers.size > 0) await Promise.all([...this.timers]);
    record.measuredUntil = this.now();
    this.stopping = true;
    this.say('stopping: workers first, then the host');
    const stopOne = async (proc: Proc, life: { ending: string }, graceMs: number) => {
      life.ending = 'stopped';
      const code = await stop(proc, graceMs);
      if (code !== 0) record.stopProblems.push(`${proc.name} did not stop cleanly on SIGINT (exit ${code})`);
    };
    await Promise.all(this.slots.map((slot) => slot.proc && slot.life && stopOne(slot.proc, slot.life, 15_000)));
    const last = this.host;
    if (last) {
      await stopOne(last.proc, last.life, 20_000);
      last.life.endedAt = this.now();
      record.checkpoints.push({
        at: this.now(),
        when: 'end',
        life: record.hosts.length - 1,
        check: await checkCheckpoint(this.dir),
      });
    }
    await stop(server, 5_000);
  }
}

export async function runChaos(options: ChaosOptions): Promise<ChaosFigures> {
  return new ChaosRun(options).run();
}

/**
 * Worker threads for the CPU backend's WebAssembly kernels: each thread instantiates the same
 * kernel modules on one shared memory (a shared WasmArena), so a kernel call is just its export's
 * index and its i32/f32 arguments (byte addresses into that memory). A job is a list of tasks,
 * each a sequence of calls run in order by one thread; the threads (the caller's among them) take
 * the next task from a shared counter until none is left, so a thread that the OS holds back
 * (another process on its core) delays the job by one task at most, not by its share. A kernel
 * split into tasks that each own their outputs (and their scratch) gives bitwise the same result
 * whichever thread runs which task, on any number of threads.
 *
 * The threads are spawned from a small self-contained script (THREAD_SOURCE: no imports, so it
 * runs as it is in Node's worker_threads and from a blob: URL in browsers) by the spawner the
 * package entry registers (spawn.node.ts, spawn.browser.ts). They start asynchronously: until
 * every thread has instantiated its modules (`ready`), jobs run whole on the calling thread, with
 * the same results. Between jobs a thread spins for SPIN_MS, then sleeps in Atomics.wait. The
 * caller spins as long for the others to finish, then waits in Atomics.wait where it may (Node,
 * workers) and goes on spinning where it may not (a browser's main thread).
 */
import type { WasmArena } from './arena.cpu.ts';
import type { ModuleFamily } from './wasm.cpu.ts';

/** One kernel call: the function (from `KernelThreads.fn`) and its arguments. */
export interface KernelCall {
  fn: number;
  args: readonly number[];
  /** Bit i set: argument i is an f32 (else an i32). */
  floats?: number;
}

/** Starts a thread running THREAD_SOURCE's function on `data`; returns how to stop it. */
export type ThreadSpawner = (source: string, data: ThreadData) => { terminate(): void };

/** What a thread is given at start. */
export interface ThreadData {
  memory: WebAssembly.Memory;
  modules: WebAssembly.Module[];
  control: SharedArrayBuffer;
  calls: SharedArrayBuffer;
  index: number;
  count: number;
}

// Control words (Int32Array over `control`).
const GENERATION = 0; // bumped to start a job, or to stop
const DONE = 1; // tasks of the current job finished
const READY = 2; // threads that have instantiated their modules
const STOP = 3;
const FAILED = 4; // a thread threw: its message is in the calls buffer's error area
const TASKS = 5; // tasks in the current job
const NEXT = 6; // (generation mod 2¹⁶) << 16 | the next task to take: a claim is only ever on its own job
/** The most tasks one job may have (the low 16 bits of NEXT). */
const MAX_JOB_TASKS = 0xffff;
const CONTROL_WORDS = 8;
/**
 * How long a thread spins for the next job before it sleeps in Atomics.wait, ms. Waking a
 * sleeping thread costs 80–100 µs here (futex), against 5 µs for a spinning one, and a step
 * dispatches about 150 jobs with a little serial work between them: sleeping between them cost
 * tiny's 2-thread step 10–30 ms. A thread idle longer than this (between steps, under a duty
 * cycle) sleeps.
 */
const SPIN_MS = 2;
/** How long `ready` waits for the threads to start before giving up on them, ms. */
const READY_TIMEOUT_MS = 15_000;
/** Tasks a thread's share of a kernel is split into (see `tasks`). */
const TASKS_PER_THREAD = 4;
/**
 * Int32 words of call encoding per job: [task starts…, end][calls: fn, argc, floats, args…].
 * A longer list of tasks runs as several jobs (`run` splits it).
 */
const CALL_WORDS = 1 << 18;

/**
 * The thread's whole program, as source (so it needs no bundler or loader). `run(data)`:
 * instantiate, say ready, then loop: wait for a new generation, take tasks of that job until
 * none is left, counting each one DONE. A claim is a compare-and-swap on NEXT that checks the
 * job's generation too, so a thread the OS held back past the end of a job can never take a task
 * of the next job by the last one's count. The caller waits for DONE, not for the threads: one
 * that never woke for a job costs that job nothing.
 */
export const THREAD_SOURCE = `(data) => {
  const { memory, modules, control, calls, index } = data;
  const ctl = new Int32Array(control);
  const words = new Int32Array(calls);
  const floats = new Float32Array(calls);
  const table = [];
  for (const module of modules) {
    const exports = new WebAssembly.Instance(module, { env: { memory } }).exports;
    for (const d of WebAssembly.Module.exports(module)) if (d.kind === 'function') table.push(exports[d.name]);
  }
  let seen = Atomics.load(ctl, ${GENERATION}); // before READY: no job can start before it is read
  Atomics.add(ctl, ${READY}, 1);
  Atomics.notify(ctl, ${READY});
  for (;;) {
    // Spin a while (a job usually follows within a step's serial work), then sleep.
    for (let spin = 0, until = performance.now() + ${SPIN_MS}; Atomics.load(ctl, ${GENERATION}) === seen; spin++) {
      if ((spin & 63) === 0 && performance.now() > until) Atomics.wait(ctl, ${GENERATION}, seen);
    }
    seen = Atomics.load(ctl, ${GENERATION});
    if (Atomics.load(ctl, ${STOP}) !== 0) return;
    const tasks = Atomics.load(ctl, ${TASKS});
    const tag = (seen & 0xffff) << 16;
    for (;;) {
      const claim = Atomics.load(ctl, ${NEXT});
      if ((claim & 0xffff0000) !== tag || (claim & 0xffff) >= tasks) break;
      if (Atomics.compareExchange(ctl, ${NEXT}, claim, claim + 1) !== claim) continue;
      const task = claim & 0xffff;
      try {
        for (let at = words[task], end = words[task + 1]; at < end; ) {
          const fn = words[at], argc = words[at + 1], mask = words[at + 2];
          const args = new Array(argc);
          for (let i = 0; i < argc; i++) args[i] = (mask >> i) & 1 ? floats[at + 3 + i] : words[at + 3 + i];
          table[fn](...args);
          at += 3 + argc;
        }
      } catch (error) {
        Atomics.store(ctl, ${FAILED}, 1 + index);
      }
      if (Atomics.add(ctl, ${DONE}, 1) + 1 === tasks) Atomics.notify(ctl, ${DONE});
    }
  }
}`;

let spawner: ThreadSpawner | null = null;
/** Registers how this platform starts threads (the package entries do, at import). */
export function registerThreadSpawner(spawn: ThreadSpawner): void {
  spawner = spawn;
}

/** Whether Atomics.wait may block this thread (not on a browser's main thread). */
function canBlock(): boolean {
  const scope = globalThis as { document?: unknown };
  return typeof scope.document === 'undefined';
}

/** Kernel threads on one shared WasmArena. */
export class KernelThreads {
  private readonly control = new SharedArrayBuffer(4 * CONTROL_WORDS);
  private readonly ctl = new Int32Array(this.control);
  private readonly callBuffer = new SharedArrayBuffer(4 * CALL_WORDS);
  private readonly words = new Int32Array(this.callBuffer);
  private readonly floats = new Float32Array(this.callBuffer);
  /** Every exported function of the modules, in THREAD_SOURCE's table order. */
  private readonly table: ((...args: number[]) => void)[] = [];
  private readonly index = new Map<ModuleFamily, Map<string, number>>();
  private readonly threads: { terminate(): void }[] = [];
  private readonly blocking = canBlock();
  private closed = false;
  /** Resolves when every thread has started (at once for one thread). */
  readonly ready: Promise<void>;

  /**
   * `count` threads in all (the caller's included) on `arena` (which must be shared when
   * count > 1), each with `modules` instantiated. Throws where threads cannot be had: no
   * registered spawner, no SharedArrayBuffer (a browser page that is not cross-origin isolated).
   */
  constructor(
    private readonly arena: WasmArena,
    modules: readonly ModuleFamily[],
    readonly size: number,
    private readonly readyTimeoutMs = READY_TIMEOUT_MS,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`KernelThreads: ${size} threads`);
    const compiled = modules.map((family) => this.load(family));
    if (size === 1) {
      this.ready = Promise.resolve();
      return;
    }
    if (!arena.shared) throw new Error('KernelThreads: more than one thread needs a shared WasmArena');
    if (!spawner) throw new Error('KernelThreads: no thread spawner registered on this platform');
    for (let index = 1; index < size; index++) {
      const data: ThreadData = {
        memory: arena.memory,
        modules: compiled,
        control: this.control,
        calls: this.callBuffer,
        index,
        count: size,
      };
      this.threads.push(spawner(THREAD_SOURCE, data));
    }
    this.ready = this.waitReady();
  }

  /**
   * Polls READY on a timer: a timer keeps Node's event loop alive while the threads start (a
   * pending Atomics.waitAsync does not, and the threads are unref'd), and a browser's main
   * thread may not block. Gives up after `readyTimeoutMs` (READY_TIMEOUT_MS; a thread that could not start: a
   * Content-Security-Policy without blob: workers, no memory): jobs then go on running on the
   * calling thread, and whatever waits on `ready` is not left waiting for ever.
   */
  private async waitReady(): Promise<void> {
    const until = Date.now() + this.readyTimeoutMs;
    while (Atomics.load(this.ctl, READY) < this.size - 1 && !this.closed && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  /**
   * Tasks to split a kernel into: one on one thread, else TASKS_PER_THREAD a thread, so that a
   * thread the OS holds back leaves little for the others to wait on.
   */
  get tasks(): number {
    return this.size === 1 ? 1 : TASKS_PER_THREAD * this.size;
  }

  /** Whether every thread has started (jobs run on the calling thread alone until then). */
  get started(): boolean {
    return this.size === 1 || Atomics.load(this.ctl, READY) >= this.size - 1;
  }

  /** Instantiates `family`'s module here and enters its functions in the table. */
  private load(family: ModuleFamily): WebAssembly.Module {
    const module = family(this.arena.shared);
    if (!module) throw new Error('KernelThreads: a kernel module does not compile here');
    const exports = this.arena.exportsOf<Record<string, (...args: number[]) => void>>(family);
    const names = new Map<string, number>();
    for (const d of WebAssembly.Module.exports(module)) {
      if (d.kind !== 'function') continue;
      names.set(d.name, this.table.length);
      this.table.push(exports[d.name] as (...args: number[]) => void);
    }
    this.index.set(family, names);
    return module;
  }

  /**
   * Adds a module after the start: only on one thread (other threads instantiate their modules
   * when they start, so a pool of several must be given every module it will run up front).
   */
  add(family: ModuleFamily): void {
    if (this.index.has(family)) return;
    if (this.size > 1)
      throw new Error('KernelThreads: a pool of several threads runs only the modules it started with');
    this.load(family);
  }

  /** Whether `family` is one of the modules the threads run. */
  has(family: ModuleFamily): boolean {
    return this.index.has(family);
  }

  /** The index of export `name` of `family`'s module, for KernelCall.fn. */
  fn(family: ModuleFamily, name: string): number {
    const index = this.index.get(family)?.get(name);
    if (index === undefined) throw new Error(`KernelThreads: no kernel module with a function ${name}`);
    return index;
  }

  /**
   * Runs the tasks, each on whichever thread takes it first, and returns when all are done. A
   * list too long for one job's call buffer runs as several jobs.
   */
  run(tasks: readonly (readonly KernelCall[])[]): void {
    if (tasks.length === 0) return;
    if (tasks.length === 1 || !this.started || this.closed) {
      for (const task of tasks) this.runTask(task);
      return;
    }
    const wordsOf = (task: readonly KernelCall[]) => task.reduce((n, call) => n + 3 + call.args.length, 1);
    for (let start = 0; start < tasks.length; ) {
      // As many tasks as fit one job's buffer (at least one).
      let end = start;
      let words = 1;
      for (; end < tasks.length && end - start < MAX_JOB_TASKS; end++) {
        const next = wordsOf(tasks[end] as readonly KernelCall[]);
        if (end > start && words + next > CALL_WORDS) break;
        words += next;
      }
      const chunk = tasks.slice(start, end);
      // A task too long for the buffer runs here, on this thread: slower, the same results.
      if (words > CALL_WORDS) for (const task of chunk) this.runTask(task);
      else this.job(chunk);
      start = end;
    }
  }

  /** One job: the tasks encoded into the call buffer, the threads woken, this thread's share run, then a wait for theirs. */
  private job(tasks: readonly (readonly KernelCall[])[]): void {
    const { words, floats, ctl } = this;
    let at = tasks.length + 1;
    for (const [t, task] of tasks.entries()) {
      words[t] = at;
      for (const call of task) {
        words[at] = call.fn;
        words[at + 1] = call.args.length;
        words[at + 2] = call.floats ?? 0;
        for (const [i, value] of call.args.entries()) {
          if (((call.floats ?? 0) >> i) & 1) floats[at + 3 + i] = value;
          else words[at + 3 + i] = value;
        }
        at += 3 + call.args.length;
      }
    }
    words[tasks.length] = at;
    const generation = (Atomics.load(ctl, GENERATION) + 1) | 0;
    const tag = (generation & 0xffff) << 16;
    Atomics.store(ctl, TASKS, tasks.length);
    Atomics.store(ctl, DONE, 0);
    Atomics.store(ctl, NEXT, tag);
    Atomics.store(ctl, GENERATION, generation);
    Atomics.notify(ctl, GENERATION);
    let failure: unknown = null;
    for (;;) {
      const claim = Atomics.load(ctl, NEXT);
      if ((claim & 0xffff) >= tasks.length) break;
      if (Atomics.compareExchange(ctl, NEXT, claim, claim + 1) !== claim) continue;
      try {
        this.runTask(tasks[claim & 0xffff] as readonly KernelCall[]);
      } catch (error) {
        failure ??= error;
      }
      Atomics.add(ctl, DONE, 1);
    }
    // The tasks other threads took: wait for them (spinning first, as they do).
    const until = performance.now() + SPIN_MS;
    for (let spin = 0, done = Atomics.load(ctl, DONE); done < tasks.length; done = Atomics.load(ctl, DONE)) {
      if (this.blocking && (++spin & 63) === 0 && performance.now() > until) Atomics.wait(ctl, DONE, done, 50);
    }
    const failed = Atomics.exchange(ctl, FAILED, 0);
    if (failure) throw failure;
    if (failed) throw new Error(`KernelThreads: a kernel failed on thread ${failed - 1}`);
  }

  private runTask(task: readonly KernelCall[]): void {
    for (const call of task) (this.table[call.fn] as (...args: number[]) => void)(...call.args);
  }

  /** Stops the threads (jobs then run on the calling thread alone). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.ctl, STOP, 1);
    Atomics.add(this.ctl, GENERATION, 1);
    Atomics.notify(this.ctl, GENERATION);
    for (const thread of this.threads) thread.terminate();
  }
}

/**
 * Splits [0, n) into `parts` contiguous ranges whose starts are multiples of `align` (the last
 * takes the remainder); fewer ranges when n is small. Empty ranges are left out.
 */
export function splitRange(n: number, parts: number, align: number): [number, number][] {
  const units = Math.ceil(n / align);
  const count = Math.max(1, Math.min(parts, units));
  const ranges: [number, number][] = [];
  for (let p = 0; p < count; p++) {
    const start = Math.min(n, Math.floor((units * p) / count) * align);
    const end = p === count - 1 ? n : Math.min(n, Math.floor((units * (p + 1)) / count) * align);
    if (end > start) ranges.push([start, end]);
  }
  return ranges;
}

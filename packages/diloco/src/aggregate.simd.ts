/**
 * CenteredClip's passes (aggregate.ts) in WebAssembly SIMD, two coordinates a step in float64,
 * for K = 2 … MAX_SIMD_ROWS contributions (a module per K, each row in its own register):
 *
 * - norms: ‖Δ_k‖² for every k in one pass (K running sums side by side);
 * - start: the coordinate-wise median v of f_k·Δ_k, and ‖f_k·Δ_k − v‖² for every k;
 * - step: v ← v + Σ_k pull_k·(f_k·Δ_k − v), and (but for the last iteration) the new distances.
 *
 * Bitwise what the scalar loops give: every coordinate's arithmetic is theirs, in their order
 * (the step's sum from +0 in row order, one rounding each), and every running sum adds its terms
 * in index order, one at a time (lane 0, then lane 1): no reassociation. The median sorts each
 * column with a network of compare-exchanges that keep equal values in place; a different sort
 * can only order equal values differently, and equal finite floats are the same bits except −0
 * and +0, so `start` reports a −0 and the caller runs the scalar pass then.
 */
import { compileOnce, FunctionBuilder, type ModuleFamily, op, WasmArena } from '@shoal/gpu/simd';
import { columnMedian, lowerMiddle, pullsOf } from './clip-math.ts';

/** The most contributions a module is built for; beyond, the scalar loops (rooms are smaller). */
export const MAX_SIMD_ROWS = 16;

interface RowLocals {
  /** Each row's byte address (read from the table at the call's start). */
  rows: number[];
  /** Each row's factor, as f64x2; none when every factor is 1 (f·x = x: the multiply is skipped). */
  factors: number[];
  /** A v128 scratch local for the four floats loaded. */
  quad: number;
}

function loadRows(f: FunctionBuilder, K: number, table: number, factorTable: number | null): RowLocals {
  const rows = Array.from({ length: K }, () => f.local('i32'));
  const factors = factorTable === null ? [] : Array.from({ length: K }, () => f.local('v128'));
  for (let k = 0; k < K; k++) {
    f.emit(op.localGet(table), op.i32Load(4 * k), op.localSet(rows[k] as number));
    if (factorTable !== null) {
      f.emit(op.localGet(factorTable), op.f64Load(8 * k), op.f64x2Splat, op.localSet(factors[k] as number));
    }
  }
  return { rows, factors, quad: f.local('v128') };
}

/** The upper two floats of a v128 moved to the lower two (the rest: the lower two). */
const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7];

/**
 * Emits row_k[i … i + 4) as two f64x2, (f·row[i], f·row[i + 1]) into `low` and the next two into
 * `high` (the factor only when the rows have factors).
 */
function emitLoad(f: FunctionBuilder, rows: RowLocals, k: number, i: number, low: number, high: number): void {
  const { quad } = rows;
  f.emit(op.localGet(rows.rows[k] as number), op.localGet(i), op.i32Add, op.v128Load(), op.localSet(quad));
  for (const [out, lanes] of [
    [low, null],
    [high, HIGH_HALF],
  ] as const) {
    f.emit(op.localGet(quad));
    if (lanes) f.emit(op.localGet(quad), op.i8x16Shuffle(...lanes));
    f.emit(op.f64x2PromoteLowF32x4);
    if (rows.factors.length > 0) f.emit(op.localGet(rows.factors[k] as number), op.f64x2Mul);
    f.emit(op.localSet(out));
  }
}

/** Emits sum += e[0]; sum += e[1] for local f64x2 `e` squared: the running sum in index order. */
function emitAccumulate(f: FunctionBuilder, e: number, sum: number, square: number): void {
  f.emit(op.localGet(e), op.localGet(e), op.f64x2Mul, op.localSet(square));
  f.emit(op.localGet(sum), op.localGet(square), op.f64x2ExtractLane(0), op.f64Add);
  f.emit(op.localGet(square), op.f64x2ExtractLane(1), op.f64Add, op.localSet(sum));
}

/** `for (i = 0; i < 4·n; i += 16)`: four f32 coordinates a step (byte offsets into the rows). */
function quads(f: FunctionBuilder, n: number, i: number, body: () => void): void {
  f.forLoop(i, op.i32Const(0), [...op.localGet(n), ...op.i32Const(4), ...op.i32Mul], 16, body);
}

/** K locals of a type. */
const localsOf = (f: FunctionBuilder, K: number, type: 'v128' | 'f64') =>
  Array.from({ length: K }, () => f.local(type));

/** clipNorms(table, n, out): out[k] = Σ_i row_k[i]², float64 in index order; n a multiple of 4. */
function normsKernel(K: number): FunctionBuilder {
  const f = new FunctionBuilder('clipNorms', [
    ['table', 'i32'],
    ['n', 'i32'],
    ['out', 'i32'],
  ]);
  const { table, n, out } = f.params;
  const rows = loadRows(f, K, table, null);
  const i = f.local('i32');
  const { low, high, square } = f.named('v128', ['low', 'high', 'square']);
  const sums = localsOf(f, K, 'f64');
  quads(f, n, i, () => {
    for (let k = 0; k < K; k++) {
      emitLoad(f, rows, k, i, low, high);
      emitAccumulate(f, low, sums[k] as number, square);
      emitAccumulate(f, high, sums[k] as number, square);
    }
  });
  for (let k = 0; k < K; k++) f.emit(op.localGet(out), op.localGet(sums[k] as number), op.f64Store(8 * k));
  return f;
}

/**
 * Odd-even transposition sort of locals `s`: a compare-exchange puts min first and max second,
 * and leaves two equal values where they were (pmin keeps its first operand on a tie, pmax(b, a)
 * its first too).
 */
function emitSort(f: FunctionBuilder, s: number[], low: number): void {
  for (let round = 0; round < s.length; round++) {
    for (let j = round % 2; j + 1 < s.length; j += 2) {
      const [a, b] = [s[j] as number, s[j + 1] as number];
      f.emit(op.localGet(a), op.localGet(b), op.f64x2Pmin, op.localSet(low));
      f.emit(op.localGet(b), op.localGet(a), op.f64x2Pmax, op.localSet(b), op.localGet(low), op.localSet(a));
    }
  }
}

/**
 * clipStart(table, factors, centre, distances, n) → 1 if a −0 was met (the caller redoes it the
 * scalar way), else 0: centre = the median of f_k·row_k per coordinate; distances[k] +=
 * ‖f_k·row_k − centre‖². `unit`: every factor is 1 (not read).
 */
function startKernel(K: number, unit: boolean): FunctionBuilder {
  const f = new FunctionBuilder(
    'clipStart',
    [
      ['table', 'i32'],
      ['factors', 'i32'],
      ['centre', 'i32'],
      ['distances', 'i32'],
      ['n', 'i32'],
    ],
    'i32',
  );
  const { table, factors, centre, distances, n } = f.params;
  const rows = loadRows(f, K, table, unit ? null : factors);
  const { i, c } = f.named('i32', ['i', 'c']);
  const halves = [localsOf(f, K, 'v128'), localsOf(f, K, 'v128')] as const;
  const sorted = localsOf(f, K, 'v128');
  const sums = localsOf(f, K, 'f64');
  const { median, e, negativeZero, seen, low, square } = f.named('v128', [
    'median',
    'e',
    'negativeZero',
    'seen',
    'low',
    'square',
  ]);
  f.emit(op.i32x4Lanes(0, -0x80000000, 0, -0x80000000), op.localSet(negativeZero));
  f.emit(op.i32x4Const(0), op.localSet(seen));
  for (let k = 0; k < K; k++) f.emit(op.localGet(distances), op.f64Load(8 * k), op.localSet(sums[k] as number));
  quads(f, n, i, () => {
    for (let k = 0; k < K; k++) emitLoad(f, rows, k, i, halves[0][k] as number, halves[1][k] as number);
    for (const [h, xs] of halves.entries()) {
      for (let k = 0; k < K; k++) {
        f.emit(op.localGet(xs[k] as number), op.localSet(sorted[k] as number));
        f.emit(op.localGet(seen), op.localGet(xs[k] as number), op.localGet(negativeZero), op.i64x2Eq, op.v128Or);
        f.emit(op.localSet(seen));
      }
      emitSort(f, sorted, low);
      const mid = K >> 1;
      if (K % 2 === 1) f.emit(op.localGet(sorted[mid] as number));
      else {
        f.emit(op.localGet(sorted[mid - 1] as number), op.localGet(sorted[mid] as number), op.f64x2Add);
        f.emit(op.f64x2Const(2), op.f64x2Div);
      }
      f.emit(op.localSet(median));
      f.emit(op.localGet(i), op.i32Const(1), op.i32Shl, op.localGet(centre), op.i32Add, op.localTee(c));
      f.emit(op.localGet(median), op.v128Store(16 * h));
      for (let k = 0; k < K; k++) {
        f.emit(op.localGet(xs[k] as number), op.localGet(median), op.f64x2Sub, op.localSet(e));
        emitAccumulate(f, e, sums[k] as number, square);
      }
    }
  });
  for (let k = 0; k < K; k++) f.emit(op.localGet(distances), op.localGet(sums[k] as number), op.f64Store(8 * k));
  f.emit(op.localGet(seen), op.v128AnyTrue);
  return f;
}

/**
 * clipStep(table, factors, pulls, centre, distances, n, measure): centre += Σ_k pull_k·(f_k·row_k −
 * centre) per coordinate (the sum from +0, in row order); with `measure`, distances[k] +=
 * ‖f_k·row_k − the new centre‖². `unit`: every factor is 1 (not read).
 */
function stepKernel(K: number, unit: boolean): FunctionBuilder {
  const f = new FunctionBuilder('clipStep', [
    ['table', 'i32'],
    ['factors', 'i32'],
    ['pulls', 'i32'],
    ['centre', 'i32'],
    ['distances', 'i32'],
    ['n', 'i32'],
    ['measure', 'i32'],
  ]);
  const { table, factors, pulls, centre, distances, n, measure } = f.params;
  const rows = loadRows(f, K, table, unit ? null : factors);
  const { i, c } = f.named('i32', ['i', 'c']);
  const halves = [localsOf(f, K, 'v128'), localsOf(f, K, 'v128')] as const;
  const weights = localsOf(f, K, 'v128');
  const sums = localsOf(f, K, 'f64');
  const { old, step, next, e, square } = f.named('v128', ['old', 'step', 'next', 'e', 'square']);
  for (let k = 0; k < K; k++) {
    f.emit(op.localGet(pulls), op.f64Load(8 * k), op.f64x2Splat, op.localSet(weights[k] as number));
    f.emit(op.localGet(distances), op.f64Load(8 * k), op.localSet(sums[k] as number));
  }
  quads(f, n, i, () => {
    for (let k = 0; k < K; k++) emitLoad(f, rows, k, i, halves[0][k] as number, halves[1][k] as number);
    f.emit(op.localGet(i), op.i32Const(1), op.i32Shl, op.localGet(centre), op.i32Add, op.localSet(c));
    for (const [h, xs] of halves.entries()) {
      f.emit(op.localGet(c), op.v128Load(16 * h), op.localSet(old), op.f64x2Const(0), op.localSet(step));
      for (let k = 0; k < K; k++) {
        f.emit(op.localGet(step), op.localGet(weights[k] as number), op.localGet(xs[k] as number), op.localGet(old));
        f.emit(op.f64x2Sub, op.f64x2Mul, op.f64x2Add, op.localSet(step));
      }
      f.emit(op.localGet(old), op.localGet(step), op.f64x2Add, op.localSet(next));
      f.emit(op.localGet(c), op.localGet(next), op.v128Store(16 * h));
      f.emit(op.localGet(measure), op.if);
      for (let k = 0; k < K; k++) {
        f.emit(op.localGet(xs[k] as number), op.localGet(next), op.f64x2Sub, op.localSet(e));
        emitAccumulate(f, e, sums[k] as number, square);
      }
      f.emit(op.end);
    }
  });
  for (let k = 0; k < K; k++) f.emit(op.localGet(distances), op.localGet(sums[k] as number), op.f64Store(8 * k));
  return f;
}

/** clipOut(centre, out, n): out[i] = fround(centre[i]), one rounding each; n even. */
function outKernel(): FunctionBuilder {
  const f = new FunctionBuilder('clipOut', [
    ['centre', 'i32'],
    ['out', 'i32'],
    ['n', 'i32'],
  ]);
  const { centre, out, n } = f.params;
  const i = f.local('i32');
  f.forLoop(i, op.i32Const(0), [...op.localGet(n), ...op.i32Const(4), ...op.i32Mul], 8, () => {
    f.emit(op.localGet(out), op.localGet(i), op.i32Add);
    f.emit(op.localGet(i), op.i32Const(1), op.i32Shl, op.localGet(centre), op.i32Add, op.v128Load());
    f.emit(op.f32x4DemoteF64x2Zero, op.v128Store64Lane(0));
  });
  return f;
}

interface ClipExports {
  clipNorms(table: number, n: number, out: number): void;
  clipStart(table: number, factors: number, centre: number, distances: number, n: number): number;
  clipStep(
    table: number,
    factors: number,
    pulls: number,
    centre: number,
    distances: number,
    n: number,
    measure: number,
  ): void;
  clipOut(centre: number, out: number, n: number): void;
}

/** Per K, the modules with factors and without (every factor 1: honest rooms, most rounds). */
const families = new Map<string, ModuleFamily>();
let arena: WasmArena | null | undefined;

function familyOf(K: number, unit: boolean): ModuleFamily {
  const key = `${K}:${unit}`;
  let family = families.get(key);
  if (!family) {
    family = compileOnce(() => [normsKernel(K), startKernel(K, unit), stepKernel(K, unit), outKernel()]);
    families.set(key, family);
  }
  return family;
}

/**
 * CenteredClip's kernels for K rows of n values, placed once on a per-process arena; null where
 * WebAssembly SIMD is missing or K is outside 2 … MAX_SIMD_ROWS. n a multiple of 4: the caller
 * runs the last few coordinates itself, after each pass, continuing its running sums.
 */
export class ClipKernels {
  private kernels: ClipExports;
  private readonly table: number;
  private readonly factorsAt: number;
  private readonly pullsAt: number;
  private readonly sumsAt: number;
  /** Where the centre (n float64) lives, and the float32 result. */
  private readonly centreAt: number;
  private readonly outAt: number;

  private constructor(
    private readonly arena: WasmArena,
    private readonly K: number,
    private readonly n: number,
    rows: readonly Float32Array[],
  ) {
    this.kernels = arena.exportsOf<ClipExports>(familyOf(K, false));
    arena.resetScratch();
    const addresses = rows.map((row) => arena.place(row, 1, n));
    this.table = arena.scratch(K);
    new Int32Array(arena.memory.buffer, this.table, K).set(addresses);
    this.factorsAt = arena.scratch(2 * K);
    this.pullsAt = arena.scratch(2 * K);
    this.sumsAt = arena.scratch(2 * K);
    this.centreAt = arena.scratch(2 * n);
    this.outAt = arena.scratch(n);
  }

  static create(rows: readonly Float32Array[], n: number): ClipKernels | null {
    const K = rows.length;
    if (K < 2 || K > MAX_SIMD_ROWS || n % 4 !== 0) return null;
    if (!familyOf(K, false)() || !familyOf(K, true)()) return null;
    arena ??= WasmArena.create();
    return arena ? new ClipKernels(arena, K, n, rows) : null;
  }

  private f64(at: number, count: number): Float64Array {
    return new Float64Array(this.arena.memory.buffer, at, count);
  }

  /** Σ_i row_k[i]² per row, float64 in index order. */
  sumsOfSquares(): Float64Array {
    this.kernels.clipNorms(this.table, this.n, this.sumsAt);
    return this.f64(this.sumsAt, this.K).slice();
  }

  /**
   * The median of f_k·row_k per coordinate into the centre, and ‖f_k·row_k − centre‖² per row;
   * null when a −0 was met (the scalar pass must run). The factors hold for the steps after.
   */
  start(factors: readonly number[]): Float64Array | null {
    this.kernels = this.arena.exportsOf<ClipExports>(
      familyOf(
        this.K,
        factors.every((f) => f === 1),
      ),
    );
    this.f64(this.factorsAt, this.K).set(factors);
    this.f64(this.sumsAt, this.K).fill(0);
    if (this.kernels.clipStart(this.table, this.factorsAt, this.centreAt, this.sumsAt, this.n) !== 0) return null;
    return this.f64(this.sumsAt, this.K).slice();
  }

  /** One iteration: centre += Σ_k pull_k·(f_k·row_k − centre); the new squared distances when `measure`. */
  step(pulls: readonly number[], measure: boolean): Float64Array {
    this.f64(this.pullsAt, this.K).set(pulls);
    this.f64(this.sumsAt, this.K).fill(0);
    const { table, factorsAt, pullsAt, centreAt, sumsAt, n } = this;
    this.kernels.clipStep(table, factorsAt, pullsAt, centreAt, sumsAt, n, measure ? 1 : 0);
    return this.f64(this.sumsAt, this.K).slice();
  }

  /** The centre rounded to float32 into out[0 … n). */
  output(out: Float32Array): void {
    this.kernels.clipOut(this.centreAt, this.outAt, this.n);
    out.set(this.arena.f32.subarray(this.outAt >> 2, (this.outAt >> 2) + this.n));
  }
}

/** d·d (not d ** 2, which the language lets an engine compute otherwise). */
const square = (d: number) => d * d;

/** CenteredClip's result past the norms: the centre, the radius, and who was pulled in (positions in rows). */
export interface ClipPasses {
  values: Float32Array;
  radius: number;
  pulledIn: number[][];
}

/**
 * CenteredClip's median and iterations on the kernels (their rows are `rows`' values up to the
 * last multiple of 4; the few coordinates after it are done here, after each pass, continuing its
 * running sums). Null when the median met a −0: the scalar passes must run.
 */
export function clipPassesSimd(
  kernels: ClipKernels,
  rows: Float32Array[],
  factors: number[],
  shares: number[],
  radiusFactor: number,
  iterations: number,
  length: number,
): ClipPasses | null {
  const tail = Array.from({ length: length & 3 }, (_, t) => (length & ~3) + t);
  const x = (j: number, i: number) => (factors[j] as number) * ((rows[j] as Float32Array)[i] as number);
  const sums = kernels.start(factors);
  if (!sums) return null;
  const tailCentre = tail.map((i) => columnMedian(Float64Array.from(rows, (_, j) => x(j, i))));
  const addDistances = (into: Float64Array) => {
    for (const [t, i] of tail.entries()) {
      for (let j = 0; j < rows.length; j++) into[j] = (into[j] as number) + square(x(j, i) - (tailCentre[t] as number));
    }
  };
  addDistances(sums);
  let distances = Array.from(sums, Math.sqrt);
  const radius = radiusFactor * lowerMiddle([...distances]);
  const pulledIn: number[][] = [];
  for (let iteration = 0; iteration < iterations; iteration++) {
    const { pulls, beyond } = pullsOf(distances, shares, radius);
    pulledIn.push(beyond);
    const measure = iteration < iterations - 1;
    const next = kernels.step(pulls, measure);
    for (const [t, i] of tail.entries()) {
      let step = 0;
      const centre = tailCentre[t] as number;
      for (let j = 0; j < rows.length; j++) step = step + (pulls[j] as number) * (x(j, i) - centre);
      tailCentre[t] = centre + step;
    }
    if (measure) {
      addDistances(next);
      distances = Array.from(next, Math.sqrt);
    }
  }
  const values = new Float32Array(length); // one rounding per coordinate
  kernels.output(values);
  for (const [t, i] of tail.entries()) values[i] = tailCentre[t] as number;
  return { values, radius, pulledIn };
}

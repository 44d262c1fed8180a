/**
 * Number formatting for chart axes and legends: SI prefixes (1.2M tokens, 34.5k tok/s, 1.2 MB/s),
 * run time as mm:ss, and losses in bits per byte with nats beside them. Pure (no DOM), so the
 * series helpers and their tests share it.
 */
import { bitsPerByte } from '@shoal/data';

/** Prefixes from the largest down; below 1000 a number is written as it is. */
const SI_PREFIXES: readonly [number, string][] = [
  [1e15, 'P'],
  [1e12, 'T'],
  [1e9, 'G'],
  [1e6, 'M'],
  [1e3, 'k'],
];

/** Units that take the prefix directly ("MB/s"); any other unit follows the number ("1.2M tok/s"). */
const PREFIXED_UNITS = new Set(['B', 'B/s', 'bit/s', 'FLOP/s']);

/** `value` to `digits` significant digits, trailing zeros dropped: 2.310 → "2.31", 1e-7 → "1e-7". */
function significant(value: number, digits: number): string {
  return String(Number(value.toPrecision(digits)));
}

/** The number and SI prefix of `value`: 1_234_567 → { number: '1.23', prefix: 'M' }. */
export function siParts(value: number, digits = 3): { number: string; prefix: string } {
  if (!Number.isFinite(value)) return { number: '—', prefix: '' };
  const magnitude = Math.abs(value);
  for (const [factor, prefix] of SI_PREFIXES) {
    // Decide on the rounded number, so 999_999 is "1M" rather than "1000k".
    const scaled = Number((magnitude / factor).toPrecision(digits));
    if (scaled >= 1) return { number: significant(value / factor, digits), prefix };
  }
  return { number: significant(value, digits), prefix: '' };
}

/** 1_234_567 → "1.23M", 2.3104 → "2.31", 0 → "0"; non-finite → "—". */
export function formatSi(value: number, digits = 3): string {
  const { number, prefix } = siParts(value, digits);
  return number + prefix;
}

/**
 * A value with its unit: "1.2 MB/s" for byte units (the prefix joins the unit), "34.5k tok/s"
 * for others, "2.31" with no unit.
 */
export function formatQuantity(value: number, unit: string, digits = 3): string {
  const { number, prefix } = siParts(value, digits);
  if (!unit) return number + prefix;
  if (PREFIXED_UNITS.has(unit)) return `${number} ${prefix}${unit}`;
  return `${number}${prefix} ${unit}`;
}

/** Bytes in decimal units, as networks count them: 1_500_000 → "1.5 MB". */
export function formatBytes(bytes: number, digits = 3): string {
  return formatQuantity(bytes, 'B', digits);
}

/** Seconds since the run started as m:ss, or h:mm:ss from an hour on: 75 → "1:15", 3725 → "1:02:05". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '—';
  const sign = seconds < 0 ? '−' : '';
  const whole = Math.floor(Math.abs(seconds));
  const s = whole % 60;
  const m = Math.floor(whole / 60) % 60;
  const h = Math.floor(whole / 3600);
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${sign}${h}:${pad(m)}:${pad(s)}` : `${sign}${m}:${pad(s)}`;
}

/** The unit every loss is shown in (docs/bits-per-byte.md): losses stay in nats until shown. */
export const BITS_PER_BYTE = 'bits/byte';

/** A loss in nats per byte-token as the bare bits-per-byte number, for tables: 0.984 → "1.420". */
export function formatBitsPerByte(nats: number, digits = 3): string {
  return Number.isFinite(nats) ? bitsPerByte(nats).toFixed(digits) : '—';
}

/**
 * A loss in nats per byte-token as bits per byte, the headline figure, with the nats it came
 * from beside it: 0.984 → "1.420 bits/byte (0.984 nats)"; non-finite → "—".
 */
export function formatLoss(nats: number, digits = 3): string {
  if (!Number.isFinite(nats)) return '—';
  return `${formatBitsPerByte(nats, digits)} ${BITS_PER_BYTE} (${nats.toFixed(digits)} nats)`;
}

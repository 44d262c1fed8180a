/** The chaos run's only source of randomness: seeded, so a run's schedule can be replayed. */
import { mulberry32 } from '../../packages/gpu/src/random.ts';

/** mulberry32 (the same generator as the data's): the same sequence for the same seed. */
export const seededRandom: (seed: number) => () => number = mulberry32;

/** Uniform in [min, max). */
export const between = (random: () => number, min: number, max: number) => min + (max - min) * random();

/** One of `items`, uniformly. */
export function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new RangeError('pick from an empty list');
  return item;
}

/** `items` in a seeded random order (Fisher–Yates). */
export function shuffled<T>(random: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * The scalar pieces CenteredClip's two implementations share (aggregate.ts, aggregate.simd.ts):
 * one column's median, the lower middle of a list, and each contribution's pull on the centre.
 */

/** The lower middle of `values` (which it sorts). */
export function lowerMiddle(values: number[]): number {
  values.sort((a, b) => a - b);
  return values[Math.floor((values.length - 1) / 2)] as number;
}

/**
 * The median of one column (which it sorts, by insertion: K is small, and the order of equal
 * values does not change the middle): the middle value, or the mean of the two middles.
 */
export function columnMedian(column: Float64Array): number {
  const K = column.length;
  for (let j = 1; j < K; j++) {
    const x = column[j] as number;
    let at = j - 1;
    while (at >= 0 && (column[at] as number) > x) {
      column[at + 1] = column[at] as number;
      at--;
    }
    column[at + 1] = x;
  }
  const mid = K >> 1;
  return K % 2 === 1 ? (column[mid] as number) : ((column[mid - 1] as number) + (column[mid] as number)) / 2;
}

/**
 * Each contribution's pull on the centre: its weight share, scaled into the radius when its
 * distance is beyond it; and which ones were (their positions in `distances`).
 */
export function pullsOf(
  distances: readonly number[],
  shares: readonly number[],
  radius: number,
): { pulls: number[]; beyond: number[] } {
  const beyond: number[] = [];
  const pulls = distances.map((distance, j) => {
    const share = shares[j] as number;
    if (distance <= radius) return share;
    beyond.push(j);
    return share * (radius / distance);
  });
  return { pulls, beyond };
}

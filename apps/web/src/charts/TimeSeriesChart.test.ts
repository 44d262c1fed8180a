import type uPlot from 'uplot';
import { describe, expect, it } from 'vitest';
import { lineSeries } from './chart-options.ts';

/** The points filter uPlot calls for series 1 of `column`, when its own density rule shows points or not. */
function markers(series: uPlot.Series, column: (number | null | undefined)[], show: boolean) {
  const filter = series.points?.filter;
  if (typeof filter !== 'function') return filter ?? null;
  return filter({ data: [column.map((_, i) => i), column] } as unknown as uPlot, 1, show, null);
}

describe('a chart line', () => {
  const format = (v: number) => String(v);

  it('breaks at null instead of spanning it (undefined, a value not measured there, is joined across)', () => {
    expect(lineSeries({ label: 'room' }, '#000', format).spanGaps).toBe(false);
  });

  it('marks every value of a series of sparse measurements', () => {
    expect(lineSeries({ label: 'validation', points: true }, '#000', format).points?.show).toBe(true);
  });

  it('marks a value no line reaches, where uPlot would show no points', () => {
    const series = lineSeries({ label: 'room' }, '#000', format);
    expect(markers(series, [1, 2, null, 3, null, 4, undefined, 5], false)).toEqual([3]);
    expect(markers(series, [null, 1, null, 2, undefined, 3, null, undefined, 4, undefined], false)).toEqual([1, 8]);
    expect(markers(series, [5, undefined, undefined], false)).toEqual([0]); // a single evaluation
    expect(markers(series, [5, undefined, 4], false)).toBeNull(); // joined across
    expect(markers(series, [1, 2, 3], false)).toBeNull();
    expect(markers(series, [null, 3, null], true)).toBeNull(); // uPlot draws them all anyway
  });
});

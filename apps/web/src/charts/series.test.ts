import { bitsPerByte } from '@shoal/data';
import type { RoomViewPoint } from '@shoal/protocol';
import { describe, expect, it } from 'vitest';
import {
  BITS_PER_BYTE,
  formatBitsPerByte,
  formatBytes,
  formatDuration,
  formatLoss,
  formatQuantity,
  formatSi,
} from './format.ts';
import { timeGaps } from './gaps.ts';
import {
  bandwidthRateSeries,
  byteRates,
  CHART_FG,
  choosePeers,
  cumulativeBytesSeries,
  hasValues,
  latestEvalLoss,
  lossSeries,
  PEER_PALETTE,
  peerLabels,
  peerOrder,
  savings,
  throughputSeries,
} from './series.ts';

type Peers = RoomViewPoint['peers'];

function point(t: number, fields: Partial<RoomViewPoint> = {}): RoomViewPoint {
  return {
    t,
    tokens: t * 10,
    step: 0,
    trainLoss: null,
    evalLoss: null,
    tokensPerSecond: 0,
    bytes: 0,
    fp32Bytes: 0,
    dpBytes: 0,
    peers: {},
    ...fields,
  };
}

const peer = (loss: number | null, tokensPerSecond = 0) => ({ loss, tokensPerSecond });

describe('format', () => {
  it('writes SI numbers with three significant digits', () => {
    expect(formatSi(0)).toBe('0');
    expect(formatSi(2.3104)).toBe('2.31');
    expect(formatSi(999)).toBe('999');
    expect(formatSi(999.9)).toBe('1k');
    expect(formatSi(1_200_000)).toBe('1.2M');
    expect(formatSi(1_234_567)).toBe('1.23M');
    expect(formatSi(999_999)).toBe('1M');
    expect(formatSi(-34_500)).toBe('-34.5k');
    expect(formatSi(3e12)).toBe('3T');
    expect(formatSi(Number.NaN)).toBe('—');
  });

  it('joins the prefix to byte units and puts it on the number for others', () => {
    expect(formatQuantity(1_200_000, 'B/s')).toBe('1.2 MB/s');
    expect(formatQuantity(512, 'B')).toBe('512 B');
    expect(formatBytes(1_500_000_000)).toBe('1.5 GB');
    expect(formatQuantity(34_512, 'tok/s')).toBe('34.5k tok/s');
    expect(formatQuantity(2.31, 'nats')).toBe('2.31 nats');
    expect(formatQuantity(2.31, '')).toBe('2.31');
  });

  it('writes a loss in nats as bits per byte first, the nats beside it', () => {
    expect(formatLoss(0.984)).toBe('1.420 bits/byte (0.984 nats)');
    expect(formatLoss(2.3246, 2)).toBe('3.35 bits/byte (2.32 nats)');
    expect(formatLoss(Number.NaN)).toBe('—');
    expect(formatBitsPerByte(Math.log(256))).toBe('8.000'); // a uniform guess over bytes
    expect(formatBitsPerByte(Number.POSITIVE_INFINITY)).toBe('—');
    expect(formatQuantity(1.42, BITS_PER_BYTE)).toBe('1.42 bits/byte');
  });

  it('writes run time as m:ss, and h:mm:ss from an hour on', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(75.9)).toBe('1:15');
    expect(formatDuration(3725)).toBe('1:02:05');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('—');
  });
});

describe('peers', () => {
  const points = [
    point(0, { peers: { zed: peer(3) } }),
    point(1000, { peers: { zed: peer(2.9), bob: peer(3.1), amy: peer(3.2) } }),
    point(2000, { peers: { amy: peer(3), carl: peer(3.3) } }),
  ];

  it('keeps the order a peer was first seen (new ids in one point sorted)', () => {
    expect(peerOrder(points)).toEqual(['zed', 'amy', 'bob', 'carl']);
    expect(peerOrder([])).toEqual([]);
  });

  it('chooses the peers of the latest point first when there are too many, keeping their first-seen index', () => {
    expect(choosePeers(points, 2)).toEqual([
      { id: 'amy', index: 1 },
      { id: 'carl', index: 3 },
    ]);
    expect(choosePeers(points, 3).map((p) => p.id)).toEqual(['zed', 'amy', 'carl']);
    expect(choosePeers(points, 10)).toHaveLength(4);
    expect(choosePeers(points, 0)).toEqual([]);
  });

  it('labels peers by the shortest prefix that tells them apart', () => {
    expect(peerLabels(['abc', 'a1b2c3d4e5f6'])).toEqual(['abc', 'a1b2c3…']);
    expect(peerLabels(['abcdef01xx', 'abcdef02xx'])).toEqual(['abcdef01…', 'abcdef02…']);
    expect(peerLabels(['same-prefix-long-id-1', 'same-prefix-long-id-2'])).toEqual([
      'same-prefix-long-id-1',
      'same-prefix-long-id-2',
    ]);
  });
});

describe('lossSeries', () => {
  const points = [
    point(0, { trainLoss: 5.5, peers: { b: peer(5.5) } }),
    point(1000, { trainLoss: 4, evalLoss: 4.2, peers: { b: peer(4.1), a: peer(3.9) } }),
    point(2000, { trainLoss: 3, evalLoss: 3.5, peers: { a: peer(null) } }),
  ];

  it('has validation, mean train and one column per peer in first-seen order, null where a peer has no value', () => {
    const { data, series } = lossSeries(points, 'time');
    expect(series.map((s) => s.label)).toEqual(['validation (θ_global)', 'train (mean)', 'b', 'a']);
    expect(series[0]?.color).toBe(CHART_FG);
    expect(series[2]?.color).toBe(PEER_PALETTE[0]);
    expect(series[3]?.color).toBe(PEER_PALETTE[1]);
    // the points carry nats; the columns are bits per byte
    const bits = (column: (number | null)[]) => column.map((nats) => (nats === null ? null : bitsPerByte(nats)));
    expect(data).toEqual([
      [0, 1, 2],
      bits([null, 4.2, 3.5]),
      bits([5.5, 4, 3]),
      bits([5.5, 4.1, null]),
      bits([null, 3.9, null]),
    ]);
    expect(latestEvalLoss(points)).toBe(3.5);
    expect(latestEvalLoss([...points, point(3000)])).toBe(3.5);
    expect(latestEvalLoss([])).toBeNull();
  });

  it('puts tokens on x when asked, sorting points whose token count stepped back', () => {
    const resumed = [point(0, { tokens: 100, trainLoss: 3 }), point(1000, { tokens: 50, trainLoss: 4 })];
    const { data } = lossSeries(resumed, 'tokens');
    expect(data[0]).toEqual([50, 100]);
    expect(data[2]).toEqual([bitsPerByte(4), bitsPerByte(3)]);
  });

  it('gives empty columns for no points, with the fixed series still named', () => {
    const { data, series } = lossSeries([], 'tokens');
    expect(data).toEqual([[], [], []]);
    expect(series).toHaveLength(2);
    expect(hasValues(data)).toBe(false);
  });

  it('caps the per-volunteer series', () => {
    const peers: Peers = {};
    for (let i = 0; i < 30; i++) peers[`peer-${String(i).padStart(2, '0')}`] = peer(3);
    const { data, series } = lossSeries([point(0, { peers })], 'time', { maxPeers: 5 });
    expect(series).toHaveLength(2 + 5);
    expect(data).toHaveLength(1 + 2 + 5);
  });
});

describe('throughputSeries', () => {
  it('has the room total, then each volunteer', () => {
    const points = [
      point(0, { tokensPerSecond: 100, peers: { a: peer(3, 100) } }),
      point(1000, { tokensPerSecond: 250, peers: { a: peer(3, 120), b: peer(3, 130) } }),
    ];
    const { data, series } = throughputSeries(points, 'tokens');
    expect(series.map((s) => s.label)).toEqual(['room', 'a', 'b']);
    expect(data).toEqual([
      [0, 10_000],
      [100, 250],
      [100, 120],
      [null, 130],
    ]);
  });
});

describe('byteRates', () => {
  // Settling (settleMs 0 here, the default below) is about breaks; these are about the arithmetic.
  it('divides successive byte deltas by the time between points', () => {
    const points = [point(0, { bytes: 0 }), point(1000, { bytes: 500 }), point(3000, { bytes: 2500 })];
    expect(byteRates(points, 0, 0)).toEqual([null, 500, 1000]);
  });

  it('averages over a trailing window', () => {
    const points = [0, 1, 2, 3, 4, 5].map((s) => point(s * 1000, { bytes: s * s * 100 }));
    // window 2 s: point 4 against point 2 → (1600 − 400) / 2
    expect(byteRates(points, 2000, 0)).toEqual([null, 100, 200, 400, 600, 800]);
  });

  it('leaves a gap where the counter drops or time stands still, and starts afresh after a drop', () => {
    const points = [
      point(0, { bytes: 1000 }),
      point(1000, { bytes: 2000 }),
      point(2000, { bytes: 1500 }), // a member left
      point(3000, { bytes: 1700 }),
      point(3000, { bytes: 1800 }),
    ];
    expect(byteRates(points, 0, 0)).toEqual([null, 1000, null, 200, null]);
    // a window reaches back past a point at the same time, not past the drop: (1800 − 1500) / 1 s
    expect(byteRates(points, 5000, 0)).toEqual([null, 1000, null, 200, 300]);
  });

  it('bandwidthRateSeries puts the rates on x', () => {
    const points = [point(0, { bytes: 0 }), point(2000, { bytes: 4000 })];
    expect(bandwidthRateSeries(points, 'time', 0, 0).data).toEqual([
      [0, 2],
      [null, 2000],
    ]);
  });
});

describe('cumulativeBytesSeries', () => {
  it('has Shoal, fp32 DiLoCo and data-parallel bytes, zeros as gaps for a log axis', () => {
    const points = [
      point(0, { bytes: 0, fp32Bytes: 0, dpBytes: 0 }),
      point(1000, { bytes: 10, fp32Bytes: 80, dpBytes: 4000 }),
    ];
    const { data, series } = cumulativeBytesSeries(points, 'time');
    expect(series.map((s) => s.label)).toEqual(['Shoal', 'fp32 DiLoCo', 'data-parallel']);
    expect(data).toEqual([
      [0, 1],
      [null, 10],
      [null, 80],
      [null, 4000],
    ]);
    expect(savings(points)).toEqual({ fp32: 8, dp: 400 });
    expect(savings(points.slice(0, 1))).toEqual({ fp32: null, dp: null });
  });
});

/** Points `period` ms apart from `from`, each made by `fields(t)`. */
function every(
  period: number,
  from: number,
  count: number,
  fields: (t: number) => Partial<RoomViewPoint> = () => ({}),
) {
  return Array.from({ length: count }, (_, i) => point(from + i * period, fields(from + i * period)));
}

describe('gaps in time', () => {
  it('break every line where no point came for much longer than the points around it', () => {
    // a server outage: points every second, none for a minute, then every second again
    const points = [...every(1000, 0, 10), ...every(1000, 70_000, 10)].map((p) => ({ ...p, tokensPerSecond: 500 }));
    const { data } = throughputSeries(points, 'time');
    const [x] = data;
    const room = data[1] ?? [];
    const at = x.indexOf(39.5); // halfway between 9 s and 70 s
    expect(at).toBe(10);
    expect(room[at]).toBeNull();
    expect(room.filter((v) => v === null)).toHaveLength(1);
    expect([room[at - 1], room[at + 1]]).toEqual([500, 500]);
    // on a tokens axis too, and in the loss chart
    expect(lossSeries(points, 'tokens').data[0]).toContain(395_000); // tokens: 10 per ms
  });

  it('measure the spacing locally: a thinned history, coarser the older, has no gaps', () => {
    // appendThinned leaves older points 4 s and 2 s apart before the latest at 1 s
    const thinned = [...every(4000, 0, 10), ...every(2000, 40_000, 10), ...every(1000, 60_000, 10)];
    expect(timeGaps(thinned).some(Boolean)).toBe(false);
    // a 30 s hole among them is one, and so is time going back
    const holed = [...every(4000, 0, 10), ...every(4000, 66_000, 10)];
    expect(timeGaps(holed).filter(Boolean)).toHaveLength(1);
    const back = timeGaps([...every(1000, 0, 5), point(2500), ...every(1000, 5000, 5)]);
    expect(back.flatMap((gap, i) => (gap ? [i] : []))).toEqual([5]);
    const { data } = throughputSeries([...thinned, ...every(1000, 90_000, 5)], 'time');
    expect(data[0]).toHaveLength(thinned.length + 5 + 1);
    expect(data[1]?.filter((v) => v === null)).toHaveLength(1);
  });
});

describe('readings carried forward', () => {
  it('draw the validation loss as a point per evaluation, nothing before the first, nothing flat after one', () => {
    const evals = [null, null, 5.55, 5.55, 5.55, 5.55, 4, 4, 3.5];
    const points = evals.map((evalLoss, i) => point(i * 1000, { evalLoss }));
    const { data, series } = lossSeries(points, 'time');
    const b = bitsPerByte;
    expect(data[1]).toEqual([null, null, b(5.55), undefined, undefined, undefined, b(4), undefined, b(3.5)]);
    // markers: a single evaluation shows as a point, each one is seen
    expect(series[0]?.points).toBe(true);
    expect(latestEvalLoss(points)).toBe(3.5);
  });

  it("leave a worker's repeated loss undrawn and break its line where it is absent", () => {
    const points = [
      point(0, { trainLoss: 5, peers: { a: peer(5) } }),
      point(1000, { trainLoss: 5, peers: { a: peer(5) } }), // paused: the same reading
      point(2000, { trainLoss: 4, peers: { a: peer(4) } }),
      point(3000, { trainLoss: 4, peers: {} }), // left
      point(4000, { trainLoss: 3, peers: { a: peer(3) } }),
    ];
    const { data } = lossSeries(points, 'time');
    const b = bitsPerByte;
    expect(data[2]).toEqual([b(5), undefined, b(4), undefined, b(3)]);
    expect(data[3]).toEqual([b(5), undefined, b(4), null, b(3)]);
  });
});

describe('byte rates across a host reload', () => {
  const rate = 50_000; // bytes/s the room sends
  const two = { a: peer(3), b: peer(3) };
  /** 20 s of a running room, sampled every second: two workers, the counter at 1.7 MB by the end. */
  const before = every(1000, 0, 20, (t) => ({ bytes: 750_000 + (t / 1000) * rate, peers: two }));
  /**
   * After the reload (no points for 6 s): the new host's points from 26 s, its own counter at 0, no
   * members; they say hello at 28 s (counters 0, no loss yet), their first heartbeats at 29 s bring
   * their whole counters back, then the room sends at `rate` again. `base`: what the counter
   * carried on from (0 for a counter that restarts, 1.7 MB for one that goes on).
   */
  const after = (base: number) => [
    point(26_000, { bytes: base + 1_000 }),
    point(27_000, { bytes: base + 2_000 }),
    point(28_000, { bytes: base + 3_000, peers: { a: peer(null), b: peer(null) } }),
    ...every(1000, 29_000, 20, (t) => ({ bytes: base + 1_700_000 + ((t - 29_000) / 1000) * rate, peers: two })),
  ];

  for (const [counter, base] of [
    ['restarts', 0],
    ['goes on', 1_700_000],
  ] as const) {
    it(`give no spike and no negative rate when the counter ${counter}, and rates again once it settles`, () => {
      const points = [...before, ...after(base)];
      for (const windowMs of [0, 5000]) {
        const rates = byteRates(points, windowMs);
        const values = rates.filter((r): r is number => r !== null);
        expect(Math.max(...values)).toBeCloseTo(rate, 6);
        expect(Math.min(...values)).toBeCloseTo(rate, 6);
        // no rate across the reload, and none until the members' counters are in
        const reloadAt = before.length;
        expect(rates.slice(reloadAt, reloadAt + 6).every((r) => r === null)).toBe(true);
        expect(rates.at(-1)).toBeCloseTo(rate, 6);
      }
    });
  }

  it('give no rate over an interval that spans a gap in time', () => {
    // the counter kept counting through a 30 s outage: its 3 MB are not one interval's traffic
    const points = [
      ...every(1000, 0, 10, (t) => ({ bytes: t * 10 })),
      ...every(1000, 40_000, 10, (t) => ({ bytes: 3_000_000 + t * 10 })),
    ];
    const rates = byteRates(points, 5000, 0);
    expect(rates[10]).toBeNull();
    expect(rates.filter((r) => r !== null).every((r) => r === 10_000)).toBe(true);
  });
});

describe('hasValues', () => {
  it('is true once any series has a value', () => {
    expect(
      hasValues([
        [0, 1],
        [null, null],
      ]),
    ).toBe(false);
    expect(
      hasValues([
        [0, 1],
        [null, 2],
      ]),
    ).toBe(true);
    expect(hasValues([[]])).toBe(false);
  });
});

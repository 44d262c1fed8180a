/**
 * What a mesh stage keeps of its group's traffic: nothing it has not checked
 * (sender, shape, version, values) and never more per peer than an honest member of the group
 * can have in flight towards it. The stage under test is `me`, stage 1 of group 0 (3 stages);
 * `prev` and `next` hold stages 0 and 2; `far` is group 1's stage 0.
 */
import type { PipelineSlot, PipeMessage, RunConfig } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { type StageHarness, stageHarness } from './stage-harness.ts';

const M = 2;
const config: RunConfig = {
  ...createRunConfig({
    model: { nLayer: 3, nHead: 2, nEmbd: 16, blockSize: 16, vocabSize: 256 },
    train: { batchSize: 4, seqLen: 8 },
    diloco: { fragments: 3 },
  }),
  pipeline: { stages: 3, micros: M, schedule: '1f1b', activations: 'f32' },
};
const ROWS = (4 / M) * 8; // micro-batch 2 × T 8
const VALUES = ROWS * 16; // × C 16
const ACT_BYTES = 4 * VALUES + 4 * ROWS; // f32 values, then int32 targets

const GROUP = 0;
const VERSION = 5;
/** The newest version the roster shows (group 1's). */
const NEWEST = 6;

const slot = (stage: number, version = VERSION, group = GROUP): PipelineSlot => ({ group, stage, version });

function placed(places: Partial<Record<'prev' | 'me' | 'next' | 'far', PipelineSlot | null>> = {}): StageHarness {
  const h = stageHarness(config, 'me');
  h.roster({ prev: slot(0), me: slot(1), next: slot(2), far: slot(0, NEWEST, 1), ...places });
  return h;
}

/** Micro-batch `micro`'s activations of `step` (values `fill`, targets 1), in version `version`. */
function act(version: number, step: number, micro = 0, fill = 0.5): Omit<PipeMessage, 'kind'> {
  const payload = new Uint8Array(ACT_BYTES);
  new Float32Array(payload.buffer, 0, VALUES).fill(fill);
  new Int32Array(payload.buffer, 4 * VALUES, ROWS).fill(1);
  return { what: 'act', group: GROUP, version, step, micro, dtype: 'f32', values: VALUES, targets: ROWS, payload };
}

const answered = (h: StageHarness, to: string, reason: string) =>
  h.sent.filter((s) => s.to === to && s.message.kind === 'rejected' && s.message.reason === reason).length;

describe('a mesh stage refuses before it keeps', () => {
  it('refuses activations from a peer that does not hold the previous stage, in this version or the next, and keeps nothing', () => {
    const h = placed();
    h.pipe('far', act(VERSION, 1)); // group 1's stage 0, claiming group 0
    h.pipe('next', act(VERSION, 1)); // stage 2 sends no activations to stage 1
    h.pipe('far', act(NEWEST + 1, 1)); // a version this stage has no roster for yet
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('not-participant')).toBe(3);
    expect(answered(h, 'far', 'not-participant')).toBe(2);
    expect(h.stage.counters.refused).toBe(3);
  });

  it('refuses activations of the wrong size, in this version or the next', () => {
    const h = placed();
    const small = { ...act(VERSION, 1), values: 8, payload: new Uint8Array(8 * 4 + ROWS * 4) };
    h.pipe('prev', small);
    h.pipe('prev', { ...small, version: NEWEST + 1 });
    // what the issue sent: far more values than a micro-batch has
    const big = 4 * 1024 * 1024;
    h.pipe('prev', { ...act(NEWEST + 1, 1), values: big, targets: 0, payload: new Uint8Array(4 * big) });
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('size')).toBe(3);
    expect(answered(h, 'prev', 'size')).toBe(3);
  });

  it('refuses a version far ahead of the newest its roster shows, and keeps one just ahead', () => {
    const h = placed();
    h.pipe('prev', act(NEWEST + 1000, 1));
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('version')).toBe(1);
    h.pipe('prev', act(NEWEST + 1, 1)); // the group changed and its roster is on the way
    expect(h.stage.heldBytes).toBe(ACT_BYTES);
  });

  it('refuses non-finite activations and targets outside the vocabulary, in this version or the next', () => {
    const h = placed();
    h.pipe('prev', act(VERSION, 1, 0, Number.NaN));
    h.pipe('prev', act(NEWEST + 1, 1, 0, Number.POSITIVE_INFINITY));
    const badTarget = act(VERSION, 3);
    new Int32Array(badTarget.payload.buffer, 4 * VALUES, ROWS)[3] = 256;
    h.pipe('prev', badTarget);
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('non-finite')).toBe(2);
    expect(h.counters.total('payload')).toBe(1);
    expect(answered(h, 'prev', 'non-finite')).toBe(2);
    expect(h.stage.counters.refused).toBe(3);
  });

  it('refuses grads, tied gradients and norms of a version it has no roster for (an honest group sends none before its roster)', () => {
    const h = placed();
    const future = { group: GROUP, version: NEWEST + 1, step: 1, micro: 0, dtype: 'f32' as const, targets: 0 };
    h.pipe('next', { ...future, what: 'grad', values: VALUES, payload: new Uint8Array(4 * VALUES) });
    h.pipe('next', { ...future, what: 'norm', values: 0, sumSquares: 1, payload: new Uint8Array(0) });
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('version')).toBe(2);
  });
});

describe('a mesh stage bounds what one peer can make it hold', () => {
  it('keeps at most two steps of activations from its previous stage (this version)', () => {
    const h = placed();
    for (let step = 1; step <= 10; step++) for (let m = 0; m < M; m++) h.pipe('prev', act(VERSION, step, m));
    expect(h.stage.heldBytes).toBe(2 * M * ACT_BYTES);
    expect(h.counters.total('quota')).toBe(10 * M - 2 * M);
  });

  it("keeps at most a step of a newer version's activations, and only of the newest version it sent", () => {
    const h = placed();
    for (let step = 1; step <= 10; step++) for (let m = 0; m < M; m++) h.pipe('prev', act(NEWEST + 1, step, m));
    expect(h.stage.heldBytes).toBeLessThanOrEqual(M * ACT_BYTES);
    h.pipe('prev', act(NEWEST + 2, 1));
    expect(h.stage.heldBytes).toBe(ACT_BYTES);
  });
});

describe('a mesh stage given a new roster', () => {
  it('re-checks what it held for a newer version: a sender that turns out not to be its previous stage is refused', () => {
    // stage 0 of group 0 is empty: whoever fills it may send first
    const h = placed({ prev: null });
    h.pipe('far', act(NEWEST + 1, 1));
    expect(h.stage.heldBytes).toBe(ACT_BYTES);
    h.roster({ prev: slot(0, NEWEST + 1), me: slot(1, NEWEST + 1), next: slot(2, NEWEST + 1), far: slot(0, 2, 1) });
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total('not-participant')).toBe(1);
  });

  it('drops what it held for a version that the roster shows went to another group, and keeps nothing it refused', () => {
    const h = placed();
    h.pipe('prev', act(NEWEST + 1, 1));
    h.pipe('prev', act(NEWEST + 1000, 1));
    h.pipe('prev', { ...act(NEWEST + 1, 1, 1), values: 8, payload: new Uint8Array(8 * 4 + ROWS * 4) });
    expect(h.stage.heldBytes).toBe(ACT_BYTES);
    // group 1 changed (version 7 is its), group 0 did not: the held activations can never be taken
    h.roster({ prev: slot(0), me: slot(1), next: slot(2), far: slot(0, NEWEST + 1, 1) });
    expect(h.stage.heldBytes).toBe(0);
    h.roster({
      prev: slot(0, NEWEST + 2),
      me: slot(1, NEWEST + 2),
      next: slot(2, NEWEST + 2),
      far: slot(0, NEWEST + 1, 1),
    });
    expect(h.stage.heldBytes).toBe(0);
    expect(h.counters.total()).toBe(2); // the far one and the small one, once each
  });
});

import { describe, expect, it } from 'vitest';
import { presetConfig } from '../config.ts';
import {
  fewestStages,
  formatMemory,
  modelMemoryBytes,
  stageInFlight,
  stageMemory,
  stageMemoryBytes,
  stagePlan,
} from './memory.ts';
import { simulateSchedule } from './schedule.ts';
import { type StageSpec, splitStages } from './stages.ts';

const nano = presetConfig('nano'); // L 2, NH 4, C 64, block 64, V 256

/*
 * nano's numbers by hand (C = 64, V = 256, NH = 4):
 *   block = 12C² + 13C = 49 984 floats; wte = VC = 16 384; wpe = 64·C = 4 096; ln_f = 2C = 128
 *   whole model = 16 384 + 4 096 + 2 · 49 984 + 128 = 120 576
 *   S = 2: stage 0 = wte + wpe + block 0 = 70 464 (all owned)
 *          stage 1 = block 1 + ln_f = 50 112 owned, + the wte copy 16 384 = 66 496 held
 * Activations for a (B, T) batch, BT = B·T:
 *   per block  18·BT·C + 4·BT + 2·B·NH·T²   (7 of (BT,C), qkv 3, fch and fchGelu 4 each; 4 row stats; preatt, att)
 *   encoded    BT·C;  head  BT·C + 3·BT + BT·V  (ln_f, its mean and rstd, the losses, the logits)
 */
const perBlock = (B: number, T: number) => 18 * B * T * 64 + 4 * B * T + 2 * B * 4 * T * T;
const encoded = (B: number, T: number) => B * T * 64;
const head = (B: number, T: number) => B * T * 64 + 3 * B * T + B * T * 256;

describe('stageMemoryBytes', () => {
  const [first, last] = splitStages(2, 2) as [StageSpec, StageSpec];

  it('counts inner state, outer state over the owned range, and activations × 2 × in flight (nano, S = 2)', () => {
    // micro-batch 1 × 64: per block 73 728 + 256 + 32 768 = 106 752; encoded 4 096; head 20 672
    expect(perBlock(1, 64)).toBe(106_752);
    expect(head(1, 64)).toBe(20_672);
    // stage 0: 16·70 464 + 8·70 464 + 8·(4 096 + 106 752)·2
    expect(stageMemoryBytes(nano, first, { microBatch: 1, seqLen: 64, inFlight: 2 })).toBe(
      16 * 70_464 + 8 * 70_464 + 8 * 110_848 * 2,
    );
    expect(stageMemoryBytes(nano, first, { microBatch: 1, seqLen: 64, inFlight: 2 })).toBe(3_464_704);
    // stage 1: the copy counts in the inner state, not in the outer one
    expect(stageMemory(nano, last, { microBatch: 1, seqLen: 64, inFlight: 1 })).toEqual({
      innerBytes: 16 * 66_496,
      outerBytes: 8 * 50_112,
      activationBytes: 8 * (4_096 + 106_752 + 20_672),
      total: 2_516_992,
    });
  });

  it('grows by one micro-batch of activations and gradients per slot in flight', () => {
    const at = (inFlight: number) => stageMemoryBytes(nano, last, { microBatch: 2, seqLen: 32, inFlight });
    expect(at(3) - at(2)).toBe(8 * (encoded(2, 32) + perBlock(2, 32) + head(2, 32)));
  });

  it('refuses a shape that is not a positive count', () => {
    expect(() => stageMemoryBytes(nano, first, { microBatch: 0, seqLen: 64, inFlight: 1 })).toThrow(/microBatch/);
    expect(() => stageMemoryBytes(nano, first, { microBatch: 1, seqLen: 64, inFlight: 1.5 })).toThrow(/inFlight/);
  });
});

describe('modelMemoryBytes', () => {
  it('is the whole model on one batch: nano, batch 16 × 64', () => {
    // BT = 1 024: per block 1 179 648 + 4 096 + 524 288 = 1 708 032; encoded 65 536; head 330 752
    const activations = encoded(16, 64) + 2 * perBlock(16, 64) + head(16, 64);
    expect(activations).toBe(3_812_352);
    expect(modelMemoryBytes(nano, 16, 64)).toBe(24 * 120_576 + 8 * activations);
    expect(modelMemoryBytes(nano, 16, 64)).toBe(33_392_640);
  });

  it('is more than any stage of a split needs', () => {
    const whole = modelMemoryBytes(nano, 16, 64);
    for (const bytes of stagePlan(nano, 16, 64, 2, undefined, '1f1b').stageBytes) expect(bytes).toBeLessThan(whole);
  });
});

describe('stageInFlight', () => {
  it('is min(S − s, M) for 1F1B and M for GPipe', () => {
    expect(stageInFlight('1f1b', 4, 8)).toEqual([4, 3, 2, 1]);
    expect(stageInFlight('1f1b', 4, 2)).toEqual([2, 2, 2, 1]);
    expect(stageInFlight('gpipe', 3, 5)).toEqual([5, 5, 5]);
  });

  it("agrees with the schedule model's peak in flight", () => {
    for (const schedule of ['1f1b', 'gpipe'] as const) {
      for (const [S, M] of [
        [2, 3],
        [3, 8],
        [4, 2],
      ] as const) {
        const { peakInFlight } = simulateSchedule({
          schedule,
          forwardSeconds: new Array(S).fill(1),
          backwardSeconds: new Array(S).fill(2),
          micros: M,
          transferSeconds: 0.3,
        });
        expect(stageInFlight(schedule, S, M), `${schedule} S=${S} M=${M}`).toEqual(peakInFlight);
      }
    }
  });
});

describe('fewestStages', () => {
  // nano, batch 16 × 64. S = 1: 33 392 640 bytes. S = 2, M = 8 (micro-batch 2, BT = 128):
  //   per block 147 456 + 512 + 65 536 = 213 504; encoded 8 192; head 41 344
  //   1F1B: stage 0 holds 2 → 24·70 464 + 8·221 696·2 = 5 238 272
  //         stage 1 holds 1 → 16·66 496 + 8·50 112 + 8·263 040 = 3 569 152
  //   GPipe: both hold 8 → stage 0: 1 691 136 + 8·221 696·8 = 15 879 680
  //                         stage 1: 1 464 832 + 8·263 040·8 = 18 299 392
  it('keeps the whole model when it fits', () => {
    expect(fewestStages(nano, 16, 64, undefined, '1f1b', 33_392_640)).toEqual({
      stages: 1,
      micros: 1,
      stageBytes: [33_392_640],
      maxStageBytes: 33_392_640,
    });
  });

  it('splits nano in two below its whole-model need (1F1B)', () => {
    const plan = fewestStages(nano, 16, 64, undefined, '1f1b', 33_392_639);
    expect(plan).toEqual({ stages: 2, micros: 8, stageBytes: [5_238_272, 3_569_152], maxStageBytes: 5_238_272 });
    expect(fewestStages(nano, 16, 64, undefined, '1f1b', 5_238_272).stages).toBe(2);
  });

  it('charges GPipe for all M micro-batches', () => {
    expect(stagePlan(nano, 16, 64, 2, undefined, 'gpipe').stageBytes).toEqual([15_879_680, 18_299_392]);
    expect(fewestStages(nano, 16, 64, undefined, 'gpipe', 18_299_392).stages).toBe(2);
    expect(() => fewestStages(nano, 16, 64, undefined, 'gpipe', 18_299_391)).toThrow(/stage 1 still needs/);
  });

  it('takes the given micro-batch count', () => {
    // M = 2: micro-batch 8; stage 0 holds 2 (= min(2, 2))
    const plan = fewestStages(nano, 16, 64, 2, '1f1b', 20e6);
    expect(plan.micros).toBe(2);
    expect(plan.stageBytes[0]).toBe(24 * 70_464 + 8 * (encoded(8, 64) + perBlock(8, 64)) * 2);
  });

  it('says how much the largest stage still needs when no split fits', () => {
    let message = '';
    try {
      fewestStages(nano, 16, 64, undefined, '1f1b', 5_000_000);
    } catch (error) {
      message = (error as Error).message;
    }
    // 5 238 272 − 5 000 000 = 238 272 bytes = 232.69 KiB
    expect(message).toBe(
      'no pipeline fits a cap of 4.77 MiB: with 2 stages (one block each, M = 8, 1f1b) stage 0 still needs 5.00 MiB, 232.69 KiB over the cap',
    );
    expect(() => fewestStages(nano, 16, 64, undefined, '1f1b', 0)).toThrow(/must be > 0/);
    expect(() => fewestStages(nano, 16, 64, 3, '1f1b', 1e9)).not.toThrow(); // S = 1 ignores M
    expect(() => fewestStages(nano, 16, 64, 3, '1f1b', 1e6)).toThrow(/divide the batch/);
  });
});

describe('formatMemory', () => {
  it('uses binary units', () => {
    expect(formatMemory(512)).toBe('512 B');
    expect(formatMemory(1536)).toBe('1.50 KiB');
    expect(formatMemory(3 * 2 ** 30)).toBe('3.00 GiB');
  });
});

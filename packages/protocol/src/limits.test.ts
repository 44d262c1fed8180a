import { buildFragments, CODEC_NAMES, createCodec, type FragmentMode } from '@shoal/diloco';
import { buildLayout, type GptConfig, PRESETS } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { HEADER_BYTES } from './header.ts';
import {
  DEFAULT_MAX_JSON_BYTES,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_PENDING_BYTES,
  largestFragmentValues,
  MAX_CORPUS_PART_BYTES,
  maxMessageBytesFor,
  PEER_BUDGET_HEADROOM_BYTES,
  peerBudgetFor,
  STATE_PART_VALUES,
} from './limits.ts';
import type { RunConfig } from './schemas.ts';
import { RUN_CONFIG, SAMPLES } from './test-fixtures.ts';
import { createWireCodec } from './wire.ts';

const MiB = 1024 * 1024;

function runOf(model: GptConfig, diloco: Partial<RunConfig['diloco']> = {}): RunConfig {
  return { ...RUN_CONFIG, model, diloco: { ...RUN_CONFIG.diloco, ...diloco } };
}

describe('largestFragmentValues', () => {
  it("agrees with @shoal/model's layout and @shoal/diloco's fragments", () => {
    const shapes: GptConfig[] = [
      ...Object.values(PRESETS),
      { nLayer: 7, nHead: 3, nEmbd: 48, blockSize: 33, vocabSize: 1000 },
      { nLayer: 1, nHead: 1, nEmbd: 8, blockSize: 4, vocabSize: 5 },
    ];
    for (const model of shapes) {
      const layout = buildLayout(model);
      for (let fragments = 1; fragments <= model.nLayer; fragments++) {
        for (const mode of ['sequential', 'strided'] as FragmentMode[]) {
          const expected = Math.max(...buildFragments(layout, fragments, mode).map((f) => f.size));
          expect(largestFragmentValues(model, fragments, mode), `${JSON.stringify(model)} P=${fragments} ${mode}`).toBe(
            expected,
          );
        }
      }
    }
  });
});

describe('maxMessageBytesFor', () => {
  it('is header + JSON limit + the largest payload of the run', () => {
    // nano, P = 2: fragment 0 holds block 0 (49,984 values) and wte + wpe (320·64): 70,464 values
    const values = largestFragmentValues(RUN_CONFIG.model, 2, 'sequential');
    expect(values).toBe(70_464);
    const statePart = 8 * values; // 563,712 bytes, under a 1 MiB corpus part
    expect(maxMessageBytesFor(RUN_CONFIG)).toBe(
      HEADER_BYTES + DEFAULT_MAX_JSON_BYTES + Math.max(statePart, MAX_CORPUS_PART_BYTES),
    );
    // a fragment above STATE_PART_VALUES: its fp32 shard is the largest payload, the state part is capped
    const base = runOf(PRESETS.base, { fragments: 1 });
    const baseValues = largestFragmentValues(PRESETS.base, 1, 'sequential');
    expect(baseValues).toBeGreaterThan(2 * STATE_PART_VALUES);
    expect(maxMessageBytesFor(base)).toBe(HEADER_BYTES + DEFAULT_MAX_JSON_BYTES + 4 * baseValues);
  });

  it("covers every codec's largest encoding, even where it costs more than fp32", () => {
    // int8 with 2-value blocks: an odd count's last block is 1 value + a 4-byte scale
    const odd = { nLayer: 1, nHead: 1, nEmbd: 1, blockSize: 1, vocabSize: 1 };
    const values = largestFragmentValues(odd, 1, 'sequential'); // 12 + 13 + 2 + 2 = 29
    expect(values % 2).toBe(1);
    for (const codec of CODEC_NAMES) {
      const limit = maxMessageBytesFor(runOf(odd, { fragments: 1, codec, codecBlockSize: 2 }));
      const encoded = createCodec(codec, { blockSize: 2 }).encodedSize(values);
      expect(limit - HEADER_BYTES - DEFAULT_MAX_JSON_BYTES).toBeGreaterThanOrEqual(Math.max(encoded, 4 * values));
    }
  });

  it('admits the largest real messages of a run, encoded by the wire codec', async () => {
    const config = runOf(PRESETS.small, { fragments: 2, codec: 'fp32' });
    const limit = maxMessageBytesFor(config);
    const values = largestFragmentValues(config.model, 2, 'sequential');
    const wire = await createWireCodec({ limits: { maxMessageBytes: limit } });
    const contribution = wire.encode(
      { ...SAMPLES.contribution, codec: 'fp32', payload: new Uint8Array(4 * values) },
      1,
    );
    const partValues = Math.min(STATE_PART_VALUES, values);
    const statePart = wire.encode(
      {
        ...SAMPLES['state-transfer'],
        start: 0,
        end: partValues,
        fragmentSize: values,
        payload: new Uint8Array(8 * partValues),
      },
      1,
    );
    for (const bytes of [contribution, statePart]) {
      expect(bytes.length).toBeLessThanOrEqual(limit);
      expect(wire.decode(bytes).ok).toBe(true);
    }
    console.log(
      `run message limits: ${Object.entries(PRESETS)
        .map(([name, model]) => `${name} ${(maxMessageBytesFor(runOf(model)) / MiB).toFixed(2)} MiB`)
        .join(', ')} (fp4, P = 2), against ${DEFAULT_MAX_MESSAGE_BYTES / MiB} MiB before a run is known`,
    );
  });

  it('refuses a run whose messages would not fit a u32 total', () => {
    const huge = { nLayer: 1, nHead: 1, nEmbd: 20_000, blockSize: 8, vocabSize: 8 };
    expect(() => maxMessageBytesFor(runOf(huge, { fragments: 1 }))).toThrow(/more fragments/);
  });
});

describe('peerBudgetFor', () => {
  it('is one maximal message, its chunk overhead and the headroom', () => {
    expect(peerBudgetFor(32 * MiB)).toBe(33 * MiB + PEER_BUDGET_HEADROOM_BYTES);
    expect(DEFAULT_MAX_PENDING_BYTES).toBe(280 * MiB);
  });
});

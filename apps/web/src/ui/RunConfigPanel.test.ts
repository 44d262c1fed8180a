import { RUN_OPTION_DEFAULTS, RUN_OPTIONS, runConfigOf } from '@shoal/room/run-options';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { formatRate, presetNameOf, RunConfigPanel, runConfigRows } from './RunConfigPanel.tsx';

describe("the Run panel: the room's configuration as a person reads it", () => {
  it('names the preset and its size, the text, and each setting under the form’s label', () => {
    const config = runConfigOf({ ...RUN_OPTION_DEFAULTS, innerSteps: 30, overlap: 3, batch: 8, seq: 32, steps: 900 });
    const rows = Object.fromEntries(runConfigRows(config));
    expect(rows[RUN_OPTIONS.preset.label]).toBe('nano: 121k parameters, 2 layers × 64 wide, 64 tokens of context');
    expect(rows.Text).toBe('Moby Dick');
    expect(rows['Batch × sequence']).toBe('8 × 32 tokens per volunteer per step');
    expect(rows['GPU memory']).toMatch(/^\d+\.\d\d MiB per WebGPU volunteer$/);
    expect(rows[RUN_OPTIONS.precision.label]).toBe('f32');
    expect(rows[RUN_OPTIONS.innerSteps.label]).toBe('30');
    expect(rows[RUN_OPTIONS.overlap.label]).toBe('3');
    expect(rows[RUN_OPTIONS.codec.label]).toBe('fp4, blocks of 1024');
    expect(rows[RUN_OPTIONS.lr.label]).toBe('0.003, down to 0.0003 (warmup 20 steps)');
    expect(rows[RUN_OPTIONS.steps.label]).toBe('900; after them the rate stays at 0.0003');
    // what this run does not use is left out
    expect(rows[RUN_OPTIONS.pipelineStages.label]).toBeUndefined();
    expect(rows[RUN_OPTIONS.lowRank.label]).toBeUndefined();
  });

  it('shows a pipeline and low rank when the run has them, and a checkpoint’s model as such', () => {
    const config = runConfigOf({ ...RUN_OPTION_DEFAULTS, preset: 'tiny', pipelineStages: 2, lowRank: 4 });
    const rows = Object.fromEntries(runConfigRows(config));
    expect(rows[RUN_OPTIONS.pipelineStages.label]).toBe('2 stages, 8 micro-batches, 1f1b, activations f32');
    expect(rows[RUN_OPTIONS.lowRank.label]).toMatch(/^4 \(error target /);
    const f16 = Object.fromEntries(runConfigRows(runConfigOf({ ...RUN_OPTION_DEFAULTS, precision: 'f16' })));
    expect(f16[RUN_OPTIONS.precision.label]).toMatch(/^f16 operands, f32 sums and weights, on WebGPU volunteers/);
    const model = { nLayer: 3, nHead: 2, nEmbd: 32, blockSize: 32, vocabSize: 256 };
    expect(presetNameOf(model)).toBeNull();
    expect(presetNameOf(config.model)).toBe('tiny');
    const own = runConfigOf({ ...RUN_OPTION_DEFAULTS, seq: 32 }, { model, corpus: 'whales.txt' });
    expect(Object.fromEntries(runConfigRows(own))).toMatchObject({
      Model: expect.stringMatching(/^from a checkpoint: .* 3 layers × 32 wide/),
      Text: 'whales.txt',
    });
  });

  it('writes rates without trailing zeros, and renders a labelled definition list or nothing', () => {
    expect([3e-3, 3e-4, 1e-7, 0.7, 0.123456].map(formatRate)).toEqual(['0.003', '0.0003', '1e-7', '0.7', '0.123']);
    expect(renderToStaticMarkup(createElement(RunConfigPanel, { config: null }))).toBe('');
    const html = renderToStaticMarkup(createElement(RunConfigPanel, { config: runConfigOf(RUN_OPTION_DEFAULTS) }));
    expect(html).toMatch(
      /^<section class="card run-config" aria-labelledby="run-config-title" data-testid="run-config">/,
    );
    expect(html).toContain('<dt>Inner steps per round (H)</dt><dd>50</dd>');
  });
});

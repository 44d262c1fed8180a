import { parseRunOption, RUN_OPTION_NAMES, RUN_OPTIONS, type RunOptionName } from '@shoal/room/run-options';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it, vi } from 'vitest';

async function renderForm(search: string): Promise<string> {
  vi.stubGlobal('location', { search });
  vi.stubGlobal('localStorage', { getItem: () => null, setItem: () => {}, removeItem: () => {} });
  const { HostPage } = await import('./HostPage.tsx');
  return renderToStaticMarkup(createElement(HostPage, { roomId: null }));
}

/** The markup of one run option's field: `<div class="field…" data-testid="field-NAME">…</div>`. */
function fieldOf(html: string, name: string): string {
  // the model's field spans the row (class "field span-2")
  const start = html.search(new RegExp(`<div class="field( span-2)?" data-testid="field-${name}">`));
  expect(start, `a field for ${name}`).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf('</div>', start));
}

const entities = (text: string) => text.replace(/'/g, '&#x27;').replace(/"/g, '&quot;');

describe("the host form's fields agree with the run options table", () => {
  it('has one field per option, with its label, help, choices and the query’s value or the default', async () => {
    const html = await renderForm('?innerSteps=7&codec=int8');
    for (const name of RUN_OPTION_NAMES) {
      const spec = RUN_OPTIONS[name];
      const field = fieldOf(html, name);
      expect(field).toContain(`<label for="run-${name}">${entities(spec.label)}</label>`);
      expect(field).toContain(`<small id="run-${name}-help" class="muted">${entities(spec.help)}</small>`);
      expect(field).toContain(`name="${name}"`);
      expect(field).toContain(`aria-describedby="run-${name}-help"`);
      expect(field).toContain('aria-invalid="false"');
      const expected = name === 'innerSteps' ? 7 : name === 'codec' ? 'int8' : spec.default;
      if (spec.kind === 'choice') {
        for (const choice of spec.choices) expect(field).toContain(`value="${choice}"`);
        expect(field.match(/<option/g)?.length).toBe(spec.choices.length);
        expect(field).toMatch(new RegExp(`<option value="${expected}" selected="">`));
      } else {
        expect(field).toContain(`value="${expected}"`);
      }
    }
  });

  it('names each model with its size, from the preset’s own shape', async () => {
    const html = await renderForm('');
    const { buildLayout, presetConfig } = await import('@shoal/model');
    const { formatCount } = await import('@shoal/room/plan');
    for (const preset of RUN_OPTIONS.preset.choices) {
      const model = presetConfig(preset);
      const size = formatCount(buildLayout(model).size);
      expect(html).toContain(
        `<option value="${preset}"${preset === 'nano' ? ' selected=""' : ''}>${preset} — ${size} parameters, ${model.nLayer} layers × ${model.nEmbd} wide, ${model.blockSize} tokens of context</option>`,
      );
    }
    expect(html).toContain('nano — 121k parameters, 2 layers × 64 wide');
  });

  it('gives phones the numeric keypad: numeric for whole numbers (with the digit pattern), decimal for the rest', async () => {
    const html = await renderForm('');
    for (const name of RUN_OPTION_NAMES) {
      const spec = RUN_OPTIONS[name];
      const control = /<(input|select)[^>]*>/.exec(fieldOf(html, name))?.[0] ?? '';
      if (spec.kind === 'choice') expect(control).toMatch(/^<select/);
      else if (spec.kind === 'integer') {
        expect(control, name).toContain('inputMode="numeric"');
        expect(control, name).toContain('pattern="[0-9]*"');
      } else {
        expect(control, name).toContain('inputMode="decimal"');
        expect(control, name).not.toContain('pattern=');
      }
    }
  });

  it('shows the model and the text in the open, everything else under a closed Advanced', async () => {
    const html = await renderForm('');
    const details = html.indexOf('<details class="advanced" data-testid="advanced">');
    expect(details).toBeGreaterThan(0);
    for (const name of RUN_OPTION_NAMES) {
      const at = html.indexOf(`data-testid="field-${name}"`);
      if (RUN_OPTIONS[name].section === 'basic') expect(at, name).toBeLessThan(details);
      else expect(at, name).toBeGreaterThan(details);
    }
    expect(html.indexOf('data-testid="dataset-choice"')).toBeLessThan(details);
    expect(html.indexOf('Start from a checkpoint')).toBeGreaterThan(details);
    expect(html.indexOf('Recommend settings')).toBeGreaterThan(details);
    // each section under a heading of its own
    for (const heading of ['Training', 'Rounds between volunteers', 'On the wire']) {
      expect(html).toContain(`<legend>${heading}</legend>`);
    }
    expect(html).toMatch(
      /<button type="submit" class="primary" aria-describedby="create-problem">Create room<\/button>/,
    );
  });

  it('opens Advanced for a value the link set there, not for the model alone', async () => {
    expect(await renderForm('?innerSteps=7')).toContain('<details class="advanced" data-testid="advanced" open="">');
    expect(await renderForm('?preset=tiny')).toContain('<details class="advanced" data-testid="advanced">');
  });

  it('shows a refused query value beside its error, to be corrected, with the help kept', async () => {
    const html = await renderForm('?innerSteps=abc&preset=huge');
    const field = fieldOf(html, 'innerSteps');
    expect(field).toMatch(/name="innerSteps"[^>]*value="abc"/);
    expect(field).toContain('aria-invalid="true"');
    expect(field).toContain('aria-describedby="run-innerSteps-help run-innerSteps-error"');
    expect(field).toContain(
      `<small id="run-innerSteps-help" class="muted">${entities(RUN_OPTIONS.innerSteps.help)}</small>`,
    );
    expect(field).toContain('<small id="run-innerSteps-error" class="field-error">abc is not a number</small>');
    expect(fieldOf(html, 'preset')).toContain('unknown model &quot;huge&quot;');
    // Create waits for the correction, and says which field
    expect(html).toMatch(/<button type="submit" class="primary" disabled="" aria-describedby="create-problem">/);
    expect(html).toContain(`Correct ${RUN_OPTIONS.innerSteps.label} first.`);
  });

  it('refuses τ 60 with H 50 beside τ, its help kept, and opens Advanced to show it', async () => {
    const html = await renderForm('?overlap=60');
    const field = fieldOf(html, 'overlap');
    expect(field).toContain('aria-invalid="true"');
    expect(field).toContain('aria-describedby="run-overlap-help run-overlap-error"');
    expect(field).toContain(`<small id="run-overlap-help" class="muted">${entities(RUN_OPTIONS.overlap.help)}</small>`);
    expect(field).toContain(
      '<small id="run-overlap-error" class="field-error">less than the inner steps per round, H = 50',
    );
    expect(fieldOf(html, 'innerSteps')).toContain('aria-invalid="false"');
    expect(html).toContain('<details class="advanced" data-testid="advanced" open="">');
    expect(html).toMatch(/<button type="submit" class="primary" disabled=""/);
  });

  it('checks the fields against each other as they are typed: the text’s own error first, then the rules', async () => {
    const { formErrors } = await import('./use-run-options.ts');
    const { RUN_OPTION_DEFAULTS } = await import('@shoal/room/run-options');
    // H typed down to 2 makes the default τ of 2 wrong, on τ
    expect(formErrors({ ...RUN_OPTION_DEFAULTS, innerSteps: 2 }, {})).toEqual({
      overlap: expect.stringMatching(/^less than the inner steps per round, H = 2/),
    });
    // a sequence longer than nano's block size: wrong for nano, right for tiny
    expect(formErrors({ ...RUN_OPTION_DEFAULTS, seq: 128 }, {})).toEqual({
      seq: "at most the model's block size 64",
    });
    expect(formErrors({ ...RUN_OPTION_DEFAULTS, preset: 'tiny', seq: 128 }, {})).toEqual({});
    // what the person typed and the parser refused stays the field's error
    expect(formErrors({ ...RUN_OPTION_DEFAULTS, seq: 128 }, { seq: '12x is not a number' })).toEqual({
      seq: '12x is not a number',
    });
    // a checkpoint's model replaces the preset's
    const model = { nLayer: 1, nHead: 2, nEmbd: 32, blockSize: 32, vocabSize: 256 };
    expect(formErrors(RUN_OPTION_DEFAULTS, {}, model)).toEqual({
      fragments: "at most the model's 1 layers",
      seq: "at most the model's block size 32",
    });
  });
});

describe("the host form's Recommend", () => {
  const FIELDS = { workers: '8', linkMbps: '10', latencyMs: '50', gpuTflops: '10' };
  /** The form's schedule, batch and sequence: 2000 × 16 × 64 tokens per volunteer. */
  const FORM = { steps: 2000, batch: 16, seq: 64 };

  it('has labelled fields with visible help that describes them, a described Recommend button and a live result', async () => {
    const html = await renderForm('');
    const { RUN_OPTION_DEFAULTS } = await import('@shoal/room/run-options');
    const { ROOM_MODEL_DEFAULTS } = await import('@shoal/room/room-model-defaults');
    const help = {
      workers: 'how many will train at once',
      linkMbps: 'a home uplink is 5–50',
      latencyMs: 'one way, between volunteers',
      gpuTflops: 'sustained fp32 training speed (a laptop 2–5, a desktop card 10–30)',
    };
    for (const name of ['workers', 'linkMbps', 'latencyMs', 'gpuTflops'] as const) {
      const field = new RegExp(
        `<label class="inline" for="plan-${name}"><span>[^<]+</span><input ([^>]*)/></label><small id="plan-${name}-help" class="muted">([^<]*)</small>`,
      ).exec(html);
      expect(field, name).not.toBeNull();
      const [, input = '', shown = ''] = field as RegExpExecArray;
      expect(shown).toBe(help[name]);
      expect(input).toContain(`id="plan-${name}"`);
      expect(input).toContain(`aria-describedby="plan-${name}-help"`);
      expect(input).toContain('aria-invalid="false"');
      expect(input).toContain(`inputMode="${name === 'workers' ? 'numeric' : 'decimal'}"`);
      // the defaults are the simulator's and shoal plan's
      expect(input).toContain(`value="${ROOM_MODEL_DEFAULTS[name]}"`);
    }
    expect(html).not.toMatch(/<label[^>]*for="plan-[^>]*title=/);
    expect(html).toMatch(/<fieldset class="span-2 field recommend"><legend>/);
    expect(html).toMatch(
      /<button type="button" aria-describedby="recommend-budget recommend-result">Recommend<\/button>/,
    );
    expect(html).toMatch(/<output id="recommend-result" aria-live="polite"/);
    // the budget it plans for is the form's, and it says so: 2,000 × 16 × 64 × 4 volunteers
    const { steps, batch, seq } = RUN_OPTION_DEFAULTS;
    const budget = steps * batch * seq * ROOM_MODEL_DEFAULTS.workers;
    expect(budget).toBe(8_192_000);
    expect(html).toMatch(
      /<p id="recommend-budget"[^>]*>It plans for the form&#x27;s token budget, Schedule steps × Batch × Sequence × expected volunteers \(now 8\.19M tokens\), and sets Schedule steps so that the budget stays/,
    );
  });

  it('recommends the planner’s options for the chosen preset and the form’s token budget, which it keeps', async () => {
    const { recommendation } = await import('./RecommendSettings.tsx');
    const { plan } = await import('@shoal/room/plan');
    const result = recommendation('small', FIELDS, FORM);
    if (!('options' in result)) throw new Error(result.error);
    const tokens = 2000 * 16 * 64 * 8;
    const planned = plan({ preset: 'small', workers: 8, tokens, linkMbps: 10, latencyMs: 50, gpuTflops: 10 });
    const { preset, ...expected } = planned.options;
    expect(planned.tokens).toBe(tokens);
    expect(result.options).toEqual({ ...expected, steps: planned.timing.steps });
    // Schedule steps at the recommended batch and sequence train the same budget, to one step
    const { steps, batch, seq } = result.options;
    expect(steps * batch * seq * 8).toBeGreaterThanOrEqual(tokens);
    expect((steps - 1) * batch * seq * 8).toBeLessThan(tokens);
    // not the 20·N it planned before
    expect(tokens).not.toBe(20 * planned.model.params);
    // every recommended value is a form field, and the form's parser takes it as it is
    for (const [name, value] of Object.entries(result.options)) {
      expect(RUN_OPTION_NAMES).toContain(name);
      expect(parseRunOption(name as RunOptionName, String(value))).toEqual({ value });
    }
    expect(result.summary).toMatch(
      /^16\.4M tokens: \d+ steps of \d+ × 256 per volunteer; \d+\.\d% compute utilisation predicted(?: \(below 95%\))?; a round [\d.]+ s against τ steps of [\d.]+ s; no loss prediction \(extrapolated\)\.$/,
    );
    expect(result.notes.join(' ')).toMatch(/below the fits' range/);
  });

  it('says which field is wrong', async () => {
    const { recommendation } = await import('./RecommendSettings.tsx');
    expect(recommendation('small', { ...FIELDS, workers: '0' }, FORM)).toEqual({
      error: 'Expected volunteers: at least 1 volunteer',
      field: 'workers',
    });
    expect(recommendation('small', { ...FIELDS, workers: '2.5' }, FORM)).toEqual({
      error: 'Expected volunteers: a whole number of volunteers',
      field: 'workers',
    });
    expect(recommendation('small', { ...FIELDS, linkMbps: '' }, FORM)).toEqual({
      error: 'Their uplink, Mbit/s: the link must be a number',
      field: 'linkMbps',
    });
  });

  it('ties an error to its field: aria-invalid, and the error in its description', async () => {
    const { recommendation, RecommendSettings } = await import('./RecommendSettings.tsx');
    const fields = { ...FIELDS, linkMbps: '0' };
    const made = { preset: 'small', fields, result: recommendation('small', fields, FORM) };
    const html = renderSettings(RecommendSettings, { preset: 'small', fields, made });
    expect(html).toMatch(/<span class="field-error" id="recommend-error">Their uplink, Mbit\/s: [^<]+<\/span>/);
    const input = (name: string) => new RegExp(`<input id="plan-${name}"[^>]*>`).exec(html)?.[0] ?? '';
    expect(input('linkMbps')).toContain('aria-invalid="true"');
    expect(input('linkMbps')).toContain('aria-describedby="plan-linkMbps-help recommend-error"');
    for (const name of ['workers', 'latencyMs', 'gpuTflops']) {
      expect(input(name)).toContain('aria-invalid="false"');
      expect(input(name)).toContain(`aria-describedby="plan-${name}-help"`);
    }
  });

  it('shows a recommendation only for the preset and fields it was made for', async () => {
    const { recommendation, RecommendSettings } = await import('./RecommendSettings.tsx');
    const made = { preset: 'small', fields: FIELDS, result: recommendation('small', FIELDS, FORM) };
    if (!('summary' in made.result)) throw new Error('no recommendation');
    const summary = made.result.summary;
    const shown = (preset: string, fields: typeof FIELDS) =>
      renderSettings(RecommendSettings, { preset, fields, made }).includes(summary);
    expect(shown('small', FIELDS)).toBe(true);
    // the preset changed: the summary and its notes go, the hint comes back
    expect(shown('tiny', FIELDS)).toBe(false);
    expect(renderSettings(RecommendSettings, { preset: 'tiny', fields: FIELDS, made })).toContain(
      'Fills the inner steps per round (H), fragments (P), merge delay (τ)',
    );
    // a field changed
    expect(shown('small', { ...FIELDS, workers: '9' })).toBe(false);
    // an error goes with its field's edit too
    const wrong = { ...FIELDS, workers: '0' };
    const failed = { preset: 'small', fields: wrong, result: recommendation('small', wrong, FORM) };
    const edited = renderSettings(RecommendSettings, {
      preset: 'small',
      fields: { ...wrong, workers: '3' },
      made: failed,
    });
    expect(edited).not.toContain('aria-invalid="true"');
    expect(edited).not.toContain('recommend-error');
  });
});

/** The Recommend fieldset alone, for a preset, typed fields and a recommendation made earlier. */
function renderSettings(
  component: typeof import('./RecommendSettings.tsx').RecommendSettings,
  props: Pick<Parameters<typeof component>[0], 'preset' | 'fields' | 'made'>,
): string {
  return renderToStaticMarkup(
    createElement(component, { ...props, onField: () => {}, budget: null, checkpoint: false, onRecommend: () => {} }),
  );
}

describe("the dashboard's status", () => {
  it('is the one the host set, except that a room the schedule ended is stopped', async () => {
    const { dashboardStatus } = await import('./HostPage.tsx');
    const view = (status: 'running' | 'stopped', endedBy?: 'host' | 'schedule') =>
      ({ status, endedBy }) as unknown as Parameters<typeof dashboardStatus>[0]['view'];
    expect(dashboardStatus({ status: null, view: null })).toBe('waiting');
    expect(dashboardStatus({ status: 'running', view: view('running') })).toBe('running');
    expect(dashboardStatus({ status: 'running', view: view('stopped', 'schedule') })).toBe('stopped');
    // Resume after a Stop: the host's choice leads until the next view says so too
    expect(dashboardStatus({ status: 'running', view: view('stopped', 'host') })).toBe('running');
  });
});

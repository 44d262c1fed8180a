import { parseRunOption, RUN_OPTION_NAMES, RUN_OPTIONS, type RunOptionName } from '@shoal/swarm/run-options';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it, vi } from 'vitest';

async function renderForm(search: string): Promise<string> {
  vi.stubGlobal('location', { search });
  vi.stubGlobal('localStorage', { getItem: () => null, setItem: () => {}, removeItem: () => {} });
  const { HostPage } = await import('./HostPage.tsx');
  return renderToStaticMarkup(createElement(HostPage, { roomId: null }));
}

describe("the host form's fields agree with the run options table", () => {
  it('has one field per option, with its label, hint, choices and the query’s value or the default', async () => {
    const html = await renderForm('?innerSteps=7&codec=int8');
    for (const name of RUN_OPTION_NAMES) {
      const spec = RUN_OPTIONS[name];
      const field = new RegExp(`<label[^>]*for="run-${name}"[^>]*><span>([^<]*)</span>(.*?)</label>`).exec(html);
      expect(field, `a field for ${name}`).not.toBeNull();
      const [, label = '', control = ''] = field as RegExpExecArray;
      const entities = (text: string) => text.replace(/'/g, '&#x27;');
      expect(label).toBe(entities(spec.label));
      expect(control).toContain(`<small class="muted">${entities(spec.help)}</small>`);
      expect(control).toContain(`name="${name}"`);
      const expected = name === 'innerSteps' ? 7 : name === 'codec' ? 'int8' : spec.default;
      if (spec.kind === 'choice') {
        for (const choice of spec.choices) expect(control).toContain(`>${choice}</option>`);
        expect(control.match(/<option/g)?.length).toBe(spec.choices.length);
        expect(control).toMatch(new RegExp(`<option selected="">${expected}</option>`));
      } else {
        expect(control).toContain(`value="${expected}"`);
      }
    }
  });

  it('shows a refused query value beside its error, to be corrected', async () => {
    const html = await renderForm('?innerSteps=abc&preset=huge');
    expect(html).toMatch(/name="innerSteps"[^>]*value="abc"/);
    expect(html).toContain('abc is not a number');
    expect(html).toContain('unknown model &quot;huge&quot;');
  });
});

describe("the host form's Recommend", () => {
  it('has labelled fields for the volunteers and their link and GPU, a Recommend button and a live result', async () => {
    const html = await renderForm('');
    for (const name of ['workers', 'linkMbps', 'latencyMs', 'gpuTflops']) {
      expect(html).toMatch(
        new RegExp(`<label[^>]*for="plan-${name}"[^>]*><span>[^<]+</span><input[^>]*id="plan-${name}"`),
      );
    }
    expect(html).toMatch(/<fieldset[^>]*aria-describedby="recommend-result"/);
    expect(html).toMatch(/<button type="button"[^>]*>Recommend<\/button>/);
    expect(html).toMatch(/<output id="recommend-result" aria-live="polite"/);
  });

  it('recommends the planner’s options for the chosen preset, with its notes', async () => {
    const { recommendation } = await import('./HostPage.tsx');
    const { plan } = await import('@shoal/swarm/plan');
    const result = recommendation('small', { workers: '8', linkMbps: '10', latencyMs: '50', gpuTflops: '10' });
    if (!('options' in result)) throw new Error(result.error);
    const { preset, ...expected } = plan({
      preset: 'small',
      workers: 8,
      linkMbps: 10,
      latencyMs: 50,
      gpuTflops: 10,
    }).options;
    expect(result.options).toEqual(expected);
    // every recommended value is a form field, and the form's parser takes it as it is
    for (const [name, value] of Object.entries(result.options)) {
      expect(RUN_OPTION_NAMES).toContain(name);
      expect(parseRunOption(name as RunOptionName, String(value))).toEqual({ value });
    }
    expect(result.summary).toMatch(
      /^\d+\.\d% compute utilisation predicted; a round [\d.]+ s against τ steps of [\d.]+ s; no loss prediction \(extrapolated\)\.$/,
    );
    expect(result.notes.join(' ')).toMatch(/below the fits' range/);
  });

  it('says which field is wrong', async () => {
    const { recommendation } = await import('./HostPage.tsx');
    expect(recommendation('small', { workers: '0', linkMbps: '10', latencyMs: '50', gpuTflops: '10' })).toEqual({
      error: 'Expected volunteers: at least 1 volunteer',
    });
    expect(recommendation('small', { workers: '4', linkMbps: '', latencyMs: '50', gpuTflops: '10' })).toEqual({
      error: 'Their uplink, Mbit/s: the link must be a number',
    });
  });
});

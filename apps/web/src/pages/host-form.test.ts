import { RUN_OPTION_NAMES, RUN_OPTIONS } from '@shoal/swarm/run-options';
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

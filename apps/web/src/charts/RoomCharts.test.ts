import type { RoomViewPoint } from '@shoal/protocol';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { RoomCharts } from './RoomCharts.tsx';

/** The caption of the chart with this test id. */
function caption(html: string, testId: string): string {
  const figure = new RegExp(`<figure[^>]*data-testid="${testId}"[^>]*><figcaption[^>]*>(.*?)</figcaption>`).exec(html);
  expect(figure, `a figure ${testId}`).not.toBeNull();
  return (figure as RegExpExecArray)[1] as string;
}

describe('the room charts', () => {
  it("name the codec and the rank in use beside the bandwidth chart's title, in the room view's words", () => {
    const wire = 'fp4, low-rank r 8 / 4 (adaptive, ≤ 8) · one-step delay';
    const html = renderToStaticMarkup(createElement(RoomCharts, { points: [], wire }));
    const bandwidth = caption(html, 'chart-bandwidth');
    expect(bandwidth).toContain('Bandwidth');
    expect(bandwidth).toContain(`<span data-testid="wire-label">${wire}</span>`);
    // only there: the other charts keep their captions
    expect(caption(html, 'chart-loss')).not.toContain('wire-label');
    expect(html.match(/wire-label/g)).toHaveLength(1);
  });

  it('put the loss in bits per byte, with the latest validation loss and its nats beside the title', () => {
    const at = (t: number, evalLoss: number | null) => ({
      t,
      tokens: t,
      step: 0,
      trainLoss: 1,
      evalLoss,
      tokensPerSecond: 0,
      bytes: 0,
      fp32Bytes: 0,
      dpBytes: 0,
      peers: {},
    });
    const loss = caption(
      renderToStaticMarkup(createElement(RoomCharts, { points: [at(0, 1.2), at(1, 0.984), at(2, null)] })),
      'chart-loss',
    );
    expect(loss).toContain('<small>bits/byte</small>');
    expect(loss).toContain('validation 1.420 bits/byte (0.984 nats)');
    const before = caption(renderToStaticMarkup(createElement(RoomCharts, { points: [] })), 'chart-loss');
    expect(before).toContain('bits/byte');
    expect(before).not.toContain('chart-loss-latest');
  });

  it("wait for the members' counters after a page load instead of drawing their arrival as traffic", () => {
    const at = (t: number, bytes: number, peers: RoomViewPoint['peers']): RoomViewPoint => ({
      t,
      tokens: t,
      step: 0,
      trainLoss: null,
      evalLoss: null,
      tokensPerSecond: 0,
      bytes,
      fp32Bytes: 0,
      dpBytes: 0,
      peers,
    });
    // a reloaded host: its own counter from 0, a volunteer's hello, then its first heartbeat with 1.7 MB
    const loaded = [at(0, 1_000, {}), at(1000, 2_000, { a: { loss: null, tokensPerSecond: 0 } })];
    const reported = [...loaded, at(2000, 1_702_000, { a: { loss: 3, tokensPerSecond: 900 } })];
    const bandwidth = (points: RoomViewPoint[]) =>
      /<figure[^>]*data-testid="chart-bandwidth"[^>]*>/.exec(
        renderToStaticMarkup(createElement(RoomCharts, { points })),
      )?.[0];
    expect(bandwidth(reported)).toContain('data-empty="true"');
    // once it has settled, the rate of what is sent from then on
    const settled = [
      ...reported,
      ...[5000, 6000, 7000].map((t) => at(t, 1_702_000 + (t - 5000) * 50, reported[2]?.peers ?? {})),
    ];
    expect(bandwidth(settled)).not.toContain('data-empty');
  });

  it('say nothing of the codec for a view from before low-rank rounds', () => {
    const html = renderToStaticMarkup(createElement(RoomCharts, { points: [] }));
    expect(caption(html, 'chart-bandwidth')).toContain('Bandwidth');
    expect(html).not.toContain('wire-label');
  });
});

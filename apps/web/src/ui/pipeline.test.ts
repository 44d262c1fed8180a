import type { RoomViewPipeline } from '@shoal/protocol';
import type { RoomViewPeerRow } from '@shoal/room';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { VolunteerPipeline } from '../runtime/messages.ts';
import { PipelineGroups, VolunteerStage } from './PipelineTables.tsx';
import { blocksLabel, placeLabel, stagesLabel, stageWaiting } from './pipeline-text.ts';
import { PeersTable } from './RoomTables.tsx';

/** A room of S = 2: group 0 complete, group 1 waiting for stage 1 (what room-view.test.ts records). */
const pipeline: RoomViewPipeline = {
  stages: 2,
  micros: 8,
  schedule: '1f1b',
  activations: 'bf16',
  split: [
    { stage: 0, firstBlock: 0, endBlock: 2, embeds: true, head: false, memoryBytes: 3 * 2 ** 20 },
    { stage: 1, firstBlock: 2, endBlock: 4, embeds: false, head: true, memoryBytes: 5 * 2 ** 20 },
  ],
  groups: [
    { id: 0, version: 3, members: ['aaaaaaaa-1', 'bbbbbbbb-2'], complete: true, waitingFor: [] },
    { id: 1, version: 5, members: ['cccccccc-3', null], complete: false, waitingFor: [1] },
  ],
  unplaced: [],
};

const peer = (id: string, status: string, place?: RoomViewPeerRow['pipeline']): RoomViewPeerRow => ({
  peer: id,
  role: 'worker',
  status,
  reason: '',
  backend: 'webgpu',
  adapter: 'test',
  tokensPerSecond: 0,
  innerStep: 0,
  loss: null,
  lastSeenMs: 0,
  roundsContributed: 0,
  rejected: {},
  bytesSent: 0,
  bytesReceived: 0,
  ...(place ? { pipeline: place } : {}),
});

const peers = [
  peer('aaaaaaaa-1', 'synced', { group: 0, stage: 0, version: 3, firstBlock: 0, endBlock: 2 }),
  peer('bbbbbbbb-2', 'synced', { group: 0, stage: 1, version: 3, firstBlock: 2, endBlock: 4 }),
  peer('cccccccc-3', 'syncing', { group: 1, stage: 0, version: 5, firstBlock: 0, endBlock: 2 }),
];

/** The cells of the table row whose header cell (th scope=row) reads `label`. */
function row(html: string, label: string): string[] {
  const tr = new RegExp(`<tr[^>]*><th scope="row"[^>]*>${label}</th>(.*?)</tr>`).exec(html);
  expect(tr, `a row ${label}`).not.toBeNull();
  return [...((tr as RegExpExecArray)[1] as string).matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) => m[1] as string);
}

describe('a pipeline room on the dashboard', () => {
  it('shows the settings and a groups × stages grid, an empty slot waiting for a volunteer', () => {
    const html = renderToStaticMarkup(createElement(PipelineGroups, { pipeline, peers }));
    // the run's settings
    for (const text of ['Stages S', '>2<', 'Micro-batches M', '>8<', '1F1B', 'Activations', 'bf16']) {
      expect(html).toContain(text);
    }
    // a captioned table; one column per stage with its blocks, what else it holds and its memory
    expect(html).toMatch(/<table[^>]*data-testid="pipeline-groups"[^>]*><caption>Each row is a replica group/);
    expect(html).toContain('Stage 0<div class="muted small stage-detail">blocks 0–1 + embeddings · 3');
    expect(html).toContain('Stage 1<div class="muted small stage-detail">blocks 2–3 + head · 5');
    const [a, b, state0] = row(html, 'g0');
    expect(a).toContain('aaaaaaaa</span>');
    expect(a).toContain('<span class="status synced">synced</span>');
    expect(b).toContain('bbbbbbbb</span>');
    expect(state0).toContain('trains');
    const [c, empty, state1] = row(html, 'g1');
    expect(c).toContain('<span class="status syncing">syncing</span>');
    expect(empty).toBe('<span class="slot-empty">waiting for a volunteer</span>');
    expect(state1).toContain('waiting for stage 1');
    expect(html).not.toContain('pipeline-unplaced');
  });

  it('says so before anyone has joined, and names volunteers in no group', () => {
    const html = renderToStaticMarkup(
      createElement(PipelineGroups, { pipeline: { ...pipeline, groups: [], unplaced: ['dddddddd-4'] }, peers: [] }),
    );
    expect(html).toContain('No groups yet');
    expect(html).not.toContain('data-testid="pipeline-groups"');
    expect(html).toContain('In no group (no stage fits their memory): dddddddd');
  });

  it('gives the members table a Stage column in a pipeline room only', () => {
    const withStage = renderToStaticMarkup(
      createElement(PeersTable, { peers: [...peers, peer('eeeeeeee-5', 'joining')], pipeline: true }),
    );
    expect(withStage).toContain('<th>Stage</th>');
    const stages = [...withStage.matchAll(/data-testid="peer-stage">(.*?)<\/td>/g)].map((m) => m[1]);
    expect(stages).toEqual([
      'g0 · s0 (blocks 0–1)',
      'g0 · s1 (blocks 2–3)',
      'g1 · s0 (blocks 0–1)',
      '<span class="muted">not placed</span>',
    ]);
    const plain = renderToStaticMarkup(createElement(PeersTable, { peers }));
    expect(plain).not.toContain('<th>Stage</th>');
    expect(plain).not.toContain('peer-stage');
  });
});

describe('a pipeline room on the volunteer page', () => {
  const waitingGroup = must(pipeline.groups[1]);
  const placed: VolunteerPipeline = {
    stages: 2,
    place: { group: 1, stage: 0, version: 5, firstBlock: 0, endBlock: 2 },
    group: waitingGroup,
    starting: false,
  };

  it('says which group and stage it holds, and that it waits for a volunteer for the missing stage', () => {
    const html = renderToStaticMarkup(createElement(VolunteerStage, { pipeline: placed }));
    expect(html).toContain('Group <strong>g1</strong>, stage <strong>0</strong> of 2 (blocks 0–1 of the model)');
    expect(html).toContain('<li>Stage 0: <strong>you</strong></li>');
    expect(html).toContain('<li>Stage 1: <span class="slot-empty">waiting for a volunteer</span></li>');
    expect(html).toMatch(/role="status"[^>]*>Waiting for a volunteer for stage 1 of group 1/);
  });

  it('words each reason its stage does not train, and none once its group is whole and its engine built', () => {
    expect(stageWaiting(null)).toBeNull();
    expect(stageWaiting({ stages: 2, place: null, group: null, starting: false })).toMatch(/place you in a/);
    expect(stageWaiting(placed)).toBe(
      'Waiting for a volunteer for stage 1 of group 1: your group trains once every stage is held.',
    );
    const whole = { ...placed, group: must(pipeline.groups[0]) };
    expect(stageWaiting({ ...whole, starting: true })).toBe('Starting your stage (blocks 0–1)…');
    expect(stageWaiting(whole)).toBeNull();
    const html = renderToStaticMarkup(createElement(VolunteerStage, { pipeline: whole }));
    expect(html).not.toContain('role="status"');
    expect(html).toContain('<li>Stage 1: <span class="mono" title="bbbbbbbb-2">bbbbbbbb</span></li>');
  });
});

describe('the words', () => {
  it('count blocks and stages as a person does', () => {
    expect(blocksLabel(2, 3)).toBe('block 2');
    expect(blocksLabel(2, 4)).toBe('blocks 2–3');
    expect(placeLabel({ group: 0, stage: 1, firstBlock: 2, endBlock: 4 })).toBe('g0 · s1 (blocks 2–3)');
    expect(stagesLabel([1])).toBe('stage 1');
    expect(stagesLabel([0, 2])).toBe('stages 0 and 2');
    expect(stagesLabel([0, 1, 3])).toBe('stages 0, 1 and 3');
  });
});

function must<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('expected a value');
  return value;
}

/**
 * A pipeline-parallel room in words, for the dashboard, the watch page and the volunteer page:
 * a place ('g0 · s1 (blocks 2–3)'), the run's pipeline settings, and why a volunteer's stage is
 * not training. Pure: the figures come from the room view (@shoal/room's room-view.ts) or the
 * volunteer's stats; only the words are made here.
 */
import type { RoomViewPipeline, RoomViewPlace } from '@shoal/protocol';
import { formatBytes } from '../charts/format.ts';
import type { VolunteerPipeline } from '../runtime/messages.ts';

/** Blocks [first, end) as a person counts them: 'block 2', 'blocks 2–3'. */
export function blocksLabel(firstBlock: number, endBlock: number): string {
  return endBlock - firstBlock === 1 ? `block ${firstBlock}` : `blocks ${firstBlock}–${endBlock - 1}`;
}

/** 'g0 · s1 (blocks 2–3)': the members table's Stage column. */
export function placeLabel(place: Pick<RoomViewPlace, 'group' | 'stage' | 'firstBlock' | 'endBlock'>): string {
  return `g${place.group} · s${place.stage} (${blocksLabel(place.firstBlock, place.endBlock)})`;
}

/** 'stage 1', 'stages 0 and 2', 'stages 0, 1 and 3'. */
export function stagesLabel(stages: readonly number[]): string {
  if (stages.length === 1) return `stage ${stages[0]}`;
  return `stages ${stages.slice(0, -1).join(', ')} and ${stages.at(-1)}`;
}

/** The run's pipeline settings, one per entry: [label, value, hint]. */
export function pipelineSettings(pipeline: RoomViewPipeline): [string, string, string][] {
  return [
    ['Stages S', String(pipeline.stages), 'volunteers per replica group, each holding consecutive blocks'],
    ['Micro-batches M', String(pipeline.micros), 'per inner step, flowing through the stages'],
    [
      'Schedule',
      pipeline.schedule === '1f1b' ? '1F1B' : 'GPipe',
      pipeline.schedule === '1f1b'
        ? "at most S micro-batches' activations held per stage"
        : "every micro-batch's activations held until the backward passes",
    ],
    ['Activations', pipeline.activations, 'how activations and their gradients travel between stages'],
  ];
}

/** A stage's column heading's second line: its blocks, what else it holds, and its memory. */
export function stageDetail(stage: RoomViewPipeline['split'][number]): string {
  const extra = [stage.embeds && 'embeddings', stage.head && 'head'].filter(Boolean).join(', ');
  return `${blocksLabel(stage.firstBlock, stage.endBlock)}${extra ? ` + ${extra}` : ''} · ${formatBytes(stage.memoryBytes)}`;
}

/**
 * Why this volunteer's stage does not train now, for a person; null when it can. The same cases
 * as its engine's `waiting` (MeshStageTrainer): not placed yet, its group lacks a stage, its
 * stage's engine is being built.
 */
export function stageWaiting(pipeline: VolunteerPipeline | null): string | null {
  if (!pipeline) return null;
  const { place, group } = pipeline;
  if (!place) return 'Waiting for the host to place you in a replica group.';
  if (group && group.waitingFor.length > 0) {
    return `Waiting for a volunteer for ${stagesLabel(group.waitingFor)} of group ${place.group}: your group trains once every stage is held.`;
  }
  if (pipeline.starting) return `Starting your stage (${blocksLabel(place.firstBlock, place.endBlock)})…`;
  return null;
}

/**
 * Figures of a volunteer's stats that its worker's metrics do not give: where the coordinator's
 * roster puts it in a pipeline room, and the memory Shoal holds for the room.
 */
import { modelMemoryBytes, splitStages } from '@shoal/model';
import type { RosterMessage, RunConfig } from '@shoal/protocol';
import { pipelineGroupsOf, placeOf } from '@shoal/room';
import type { VolunteerPipeline } from './messages.ts';

/**
 * A pipeline room: the stage and group the roster gives peer `self` (none yet: null), and whether
 * its engine is still to be built for that stage (`builtStage`: the stage whose engine was built last).
 */
export function pipelineStatsOf(
  config: RunConfig | null,
  roster: RosterMessage | null,
  self: string,
  builtStage: number | null,
): VolunteerPipeline | null {
  if (!config?.pipeline) return null;
  const { stages } = config.pipeline;
  const members = roster?.members ?? [];
  const slot = members.find((m) => m.peer === self)?.pipeline ?? null;
  if (!slot) return { stages, place: null, group: null, starting: false };
  return {
    stages,
    place: placeOf(slot, splitStages(config.model.nLayer, stages)),
    group: pipelineGroupsOf(members, stages).find((g) => g.id === slot.group) ?? null,
    starting: builtStage !== slot.stage,
  };
}

/**
 * What Shoal holds for the room: the model's training state and the text or shards
 * (`heldBytes`); not told for a pipeline room or before the run is known.
 */
export function memoryBytesOf(config: RunConfig | null, heldBytes: () => number): number | null {
  if (!config || config.pipeline) return null;
  return modelMemoryBytes(config.model, config.train.batchSize, config.train.seqLen) + heldBytes();
}

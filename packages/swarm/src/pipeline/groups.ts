/**
 * The coordinator's replica groups in a pipeline-parallel room (docs/pipeline.md): each group is
 * S slots, one per stage, and a group trains only while every slot is filled. A newcomer takes
 * the first empty slot whose stage fits its memory, in the lowest group; a departure empties its
 * slot, and the groups are re-formed: a member of an incomplete group moves (keeping its stage,
 * so its state stays valid) into an earlier incomplete group that lacks its stage, so the spare
 * members complete as many groups as they can. Every change of a group's members bumps its
 * version, which its stages put on their traffic, so nothing of the group as it was is mistaken
 * for the group as it is.
 */
import { type FragmentMode, fragmentBlocks } from '@shoal/diloco';
import { type GptConfig, splitStages, stageInFlight, stageMemoryBytes } from '@shoal/model';
import type { PeerId, PipelineSlot, RunConfig } from '@shoal/protocol';

/** Per stage of the run's pipeline, the memory a volunteer needs to hold it. */
export function pipelineStageBytes(config: RunConfig): number[] {
  const { model, train, pipeline } = config;
  if (!pipeline) return [];
  const inFlight = stageInFlight(pipeline.schedule, pipeline.stages, pipeline.micros);
  const microBatch = train.batchSize / pipeline.micros;
  return splitStages(model.nLayer, pipeline.stages).map((spec) =>
    stageMemoryBytes(model, spec, { microBatch, seqLen: train.seqLen, inFlight: inFlight[spec.index] as number }),
  );
}

/**
 * Per fragment, the pipeline stage that holds all its blocks; throws a RangeError naming the
 * first fragment that spans two stages (a round synchronises one stage across the replicas).
 */
export function fragmentStages(model: GptConfig, fragments: number, mode: FragmentMode, stages: number): number[] {
  const stageOf = new Map<number, number>();
  for (const stage of splitStages(model.nLayer, stages)) {
    for (let b = stage.firstBlock; b < stage.endBlock; b++) stageOf.set(b, stage.index);
  }
  return fragmentBlocks(model.nLayer, fragments, mode).map((blocks, p) => {
    const held = new Set(blocks.map((b) => stageOf.get(b) as number));
    if (held.size > 1) {
      throw new RangeError(
        `Fragment ${p} spans two of the ${stages} pipeline stages: choose fragments that split each stage (P = S works).`,
      );
    }
    return [...held][0] as number;
  });
}

export interface Group {
  id: number;
  /** The member in each stage's slot, or null. */
  slots: (PeerId | null)[];
  version: number;
}

export class PipelineGroups {
  private readonly groups: Group[] = [];
  private readonly slotOf = new Map<PeerId, { group: Group; stage: number }>();
  /** Versions only grow, across the room's groups (a group formed again does not reuse one). */
  private nextVersion = 1;

  constructor(readonly stages: number) {
    if (!Number.isInteger(stages) || stages < 2) throw new RangeError(`a pipeline has 2 or more stages, got ${stages}`);
  }

  /**
   * Places a newcomer in the first empty slot whose stage `fits` it (lowest group, then lowest
   * stage), in a group whose every member it is `linked` to (a stage talks to its group every
   * micro-batch), opening a new group when none has one. Null when no stage fits it at all.
   */
  add(
    peer: PeerId,
    fits: (stage: number) => boolean = () => true,
    linked: (a: PeerId, b: PeerId) => boolean = () => true,
    /** A stage whose state it holds: a free slot there comes first, in any group. */
    prefer?: number,
  ): PipelineSlot | null {
    const existing = this.slot(peer);
    if (existing) return existing;
    const stages = [...Array(this.stages).keys()].filter(fits);
    if (stages.length === 0) return null;
    const joinable = (group: Group) => group.slots.every((member) => member === null || linked(peer, member));
    if (prefer !== undefined && stages.includes(prefer)) {
      const group = this.groups.find((g) => g.slots[prefer] === null && joinable(g));
      if (group) return this.place(peer, group, prefer);
    }
    for (const group of this.groups) {
      if (!joinable(group)) continue;
      const stage = stages.find((s) => group.slots[s] === null);
      if (stage !== undefined) return this.place(peer, group, stage);
    }
    const group: Group = { id: this.freeId(), slots: new Array(this.stages).fill(null), version: 0 };
    this.groups.push(group);
    this.groups.sort((a, b) => a.id - b.id);
    return this.place(peer, group, prefer !== undefined && stages.includes(prefer) ? prefer : (stages[0] as number));
  }

  /** Empties the member's slot and re-forms the groups; the groups whose members changed. */
  remove(peer: PeerId, linked: (a: PeerId, b: PeerId) => boolean = () => true): number[] {
    const at = this.slotOf.get(peer);
    if (!at) return [];
    at.group.slots[at.stage] = null;
    this.slotOf.delete(peer);
    at.group.version = this.nextVersion++;
    return [...new Set([at.group.id, ...this.reform(linked)])].sort((a, b) => a - b);
  }

  /**
   * Moves members of later incomplete groups into the gaps of earlier ones, stage for stage,
   * where that completes an earlier group whose members the movers all have channels to (two
   * volunteers that joined at once can start two groups). Returns the ids of the groups whose
   * members changed; a group left with nobody is forgotten.
   */
  reform(linked: (a: PeerId, b: PeerId) => boolean = () => true): number[] {
    const changed = this.moveIntoGaps(linked);
    for (let i = this.groups.length - 1; i >= 0; i--) {
      if ((this.groups[i] as Group).slots.every((p) => p === null)) this.groups.splice(i, 1);
    }
    return changed.sort((a, b) => a - b);
  }

  /** The member's group, stage and the group's version, or null when it holds no slot. */
  slot(peer: PeerId): PipelineSlot | null {
    const at = this.slotOf.get(peer);
    return at ? { group: at.group.id, stage: at.stage, version: at.group.version } : null;
  }

  /** Whether the member's group has every stage filled (so it trains). */
  complete(peer: PeerId): boolean {
    const at = this.slotOf.get(peer);
    return at ? at.group.slots.every((p) => p !== null) : false;
  }

  /** The groups, lowest id first (copies). */
  list(): Group[] {
    return this.groups.map((g) => ({ ...g, slots: [...g.slots] }));
  }

  private place(peer: PeerId, group: Group, stage: number): PipelineSlot {
    group.slots[stage] = peer;
    group.version = this.nextVersion++;
    this.slotOf.set(peer, { group, stage });
    return { group: group.id, stage, version: group.version };
  }

  private freeId(): number {
    const used = new Set(this.groups.map((g) => g.id));
    let id = 0;
    while (used.has(id)) id++;
    return id;
  }

  private moveIntoGaps(linked: (a: PeerId, b: PeerId) => boolean): number[] {
    const changed = new Set<number>();
    const incomplete = () => this.groups.filter((g) => g.slots.some((p) => p === null));
    for (const target of incomplete()) {
      const gaps = target.slots.flatMap((p, s) => (p === null ? [s] : []));
      const donors = new Map<number, { group: Group; peer: PeerId }>();
      const stays = target.slots.filter((p): p is PeerId => p !== null);
      for (const stage of gaps) {
        const donor = incomplete().find((g) => {
          const peer = g.slots[stage];
          return g.id > target.id && peer && stays.every((other) => linked(peer, other) && linked(other, peer));
        });
        if (!donor) break;
        donors.set(stage, { group: donor, peer: donor.slots[stage] as PeerId });
      }
      if (donors.size !== gaps.length) continue; // the spares cannot complete this group
      for (const [stage, { group, peer }] of donors) {
        group.slots[stage] = null;
        group.version = this.nextVersion++;
        target.slots[stage] = peer;
        this.slotOf.set(peer, { group: target, stage });
        changed.add(group.id);
      }
      target.version = this.nextVersion++;
      changed.add(target.id);
    }
    return [...changed];
  }
}

/**
 * Where a pipeline-parallel room's workers go (docs/pipeline.md): the coordinator's replica
 * groups, which stage holds each fragment, and what memory each stage needs. It answers where a
 * worker is placed (a slot in a group whose members it has channels to, in a stage its memory
 * holds, the stage whose state it holds first), which workers train fragment p, and whether one
 * worker is linked to another. A room without a pipeline has none.
 */
import { formatMemory } from '@shoal/model';
import type { Capabilities, PeerId, RunConfig } from '@shoal/protocol';
import type { MemberInfo, Roster } from '../roster.ts';
import { fragmentStages, PipelineGroups, pipelineStageBytes } from './groups.ts';

export class PipelinePlacement {
  /** The room's replica groups. */
  readonly groups: PipelineGroups;
  /** Per fragment, the pipeline stage that holds it. */
  private readonly stageOfFragment: number[];
  /** Per pipeline stage, the fragments it holds. */
  readonly stageFragments: number[][];
  /** Pipeline workers' stages by the state they said they hold (placed there when a slot is free). */
  private readonly heldStage = new Map<PeerId, number>();
  /** Per pipeline stage, the memory a volunteer needs to hold it (docs/pipeline.md). */
  private readonly stageBytes: number[];

  /**
   * Throws a RangeError for a pipeline of fewer than 2 stages, or one a fragment spans two stages
   * of. The roster is whose channels count, and where a worker no stage fits is told why.
   */
  constructor(
    config: RunConfig,
    pipeline: NonNullable<RunConfig['pipeline']>,
    private readonly roster: Roster,
  ) {
    const { diloco, model } = config;
    this.groups = new PipelineGroups(pipeline.stages);
    this.stageOfFragment = fragmentStages(model, diloco.fragments, diloco.fragmentMode, pipeline.stages);
    this.stageBytes = pipelineStageBytes(config);
    this.stageFragments = this.stageBytes.map((_, s) =>
      this.stageOfFragment.flatMap((stage, p) => (stage === s ? [p] : [])),
    );
  }

  /** Whether a's last heartbeat lists a channel to b (true before a's first heartbeat). */
  readonly linked = (a: PeerId, b: PeerId): boolean => this.roster.members.get(a)?.reachable?.has(b) ?? true;

  /**
   * A hello: notes the first stage whose fragments all pass `current` (the hello holds their
   * committed state), which a worker that comes back (a restarted host) is placed in when a slot
   * is free there. False when it holds no stage's state.
   */
  noteHeld(peer: PeerId, current: (p: number) => boolean): boolean {
    const held = this.stageFragments.findIndex((set) => set.every(current));
    if (held < 0) return false;
    this.heldStage.set(peer, held);
    return true;
  }

  /**
   * A worker's heartbeat (it says which channels it has): places it if it has no slot yet, and
   * joins up incomplete groups that complete each other once their channels are there. True when
   * the groups changed (the roster must go out).
   */
  heartbeat(peer: PeerId, capabilities: Capabilities): boolean {
    const placed = !this.groups.slot(peer) && this.place(peer, capabilities);
    const reformed = !this.groups.complete(peer) && this.groups.reform(this.linked).length > 0;
    return placed || reformed;
  }

  /** A member left: its slot empties and the groups re-form. */
  remove(peer: PeerId): void {
    this.groups.remove(peer, this.linked);
    this.heldStage.delete(peer);
  }

  /**
   * The workers that train fragment p: the holders of its stage in complete groups (a round
   * synchronises one stage across the replicas).
   */
  holders(p: number, workers: MemberInfo[]): MemberInfo[] {
    const stage = this.stageOfFragment[p];
    return workers.filter((w) => this.groups.slot(w.peer)?.stage === stage && this.groups.complete(w.peer));
  }

  /**
   * The worker's slot in a group whose members it has channels to (its heartbeat says, the
   * others' may predate it), in a stage its memory holds. True when placed; one whose memory
   * holds no stage stays a replica that does not train, and the roster says why.
   */
  private place(peer: PeerId, capabilities: Capabilities): boolean {
    const memory = capabilities.memoryBytes;
    const fits = (stage: number) => memory === undefined || (this.stageBytes[stage] as number) <= memory;
    if (this.groups.add(peer, fits, this.linked, this.heldStage.get(peer))) return true;
    const smallest = Math.min(...this.stageBytes);
    this.roster.setReasons(
      new Map([
        [
          peer,
          `its ${formatMemory(memory ?? 0)} holds no pipeline stage (the smallest needs ${formatMemory(smallest)})`,
        ],
      ]),
    );
    return false;
  }
}

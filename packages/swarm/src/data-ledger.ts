/**
 * A dataset room's ledger: how many batches the room has drawn from each training shard in the
 * data epochs still open. Volunteers report where they stand in their heartbeats (claims: a
 * report counts only for a shard the room's assignment gives the reporter, only forward, never
 * past the shard's batches); the coordinator sends the ledger with every roster, so a shard that
 * moves to another volunteer goes on where it was, and saves it with θ_global, so a resumed room
 * does too. docs/data.md.
 */
import { assignShards, type Dataset } from '@shoal/data';
import type { DataLedger, DatasetRef, PeerId, RosterMessage, RunConfig, ShardPosition } from '@shoal/protocol';

/** What a room's config says of `dataset`, fetched from `url` (as the room names it). */
export function datasetRefOf(dataset: Dataset, url: string): DatasetRef {
  const { train, validation } = dataset.loaded;
  return {
    manifest: dataset.hash,
    url,
    trainShards: train.length,
    validationShards: validation.length,
    trainBytes: train.reduce((sum, shard) => sum + shard.bytes, 0),
  };
}

/** Epochs the ledger keeps: volunteers cross into the next epoch one by one. */
const OPEN_EPOCHS = 2;

type RosterMember = RosterMessage['members'][number];

/**
 * The members a dataset's training shards are dealt to: workers that train or are about to.
 * Everyone computes the assignment from the same roster, so everyone agrees on it.
 */
export function dataMembers(members: readonly RosterMember[]): PeerId[] {
  return members
    .filter((member) => member.role === 'worker' && ['joining', 'syncing', 'synced'].includes(member.status))
    .map((member) => member.peer)
    .sort();
}

/** The ledger's counts for `epoch`, as a walker takes them (shard → batches drawn). */
export function drawnIn(ledger: DataLedger | undefined, epoch: number): Map<number, number> {
  const counts = new Map<number, number>();
  const entry = ledger?.epochs.find((open) => open.epoch === epoch);
  entry?.drawn.forEach((drawn, shard) => {
    if (drawn > 0) counts.set(shard, drawn);
  });
  return counts;
}

/** Most batches a shard can hold: a bound for reports (the coordinator does not read shards). */
function batchCap(dataset: DatasetRef, config: RunConfig): number {
  return Math.max(1, Math.floor(dataset.trainBytes / (config.train.batchSize * config.train.seqLen)));
}

export class RoomDataLedger {
  private readonly epochs = new Map<number, number[]>();
  private readonly cap: number;
  /** The assignment the last check used, per data epoch, for the member list it was made for. */
  private assigned: { members: string; epoch: number; owner: Map<number, PeerId> } | null = null;
  /** Reports refused (not the reporter's shard, an epoch long closed, past the end). */
  refused = 0;

  constructor(
    private readonly dataset: DatasetRef,
    private readonly config: RunConfig,
    resume?: DataLedger,
  ) {
    this.cap = batchCap(dataset, config);
    for (const open of resume?.epochs ?? []) {
      this.epochs.set(
        open.epoch,
        Array.from({ length: dataset.trainShards }, (_, shard) => Math.min(open.drawn[shard] ?? 0, this.cap)),
      );
    }
  }

  /**
   * Takes a volunteer's positions; `members` is the room's data membership (dataMembers). Returns
   * whether the ledger moved.
   */
  note(from: PeerId, positions: readonly ShardPosition[], members: readonly PeerId[]): boolean {
    let moved = false;
    for (const { epoch, shard, drawn } of positions) {
      if (shard >= this.dataset.trainShards || drawn > this.cap || !this.owns(from, epoch, shard, members)) {
        this.refused++;
        continue;
      }
      const counts = this.open(epoch);
      if (!counts) {
        this.refused++;
        continue;
      }
      if (drawn > (counts[shard] ?? 0)) {
        counts[shard] = drawn;
        moved = true;
      }
    }
    return moved;
  }

  /** What rosters and checkpoints carry. */
  message(): DataLedger {
    return {
      epochs: [...this.epochs.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([epoch, drawn]) => ({ epoch, drawn: [...drawn] })),
    };
  }

  /** The epoch's counts, opened when new (the oldest closes past OPEN_EPOCHS); null when long closed. */
  private open(epoch: number): number[] | null {
    const existing = this.epochs.get(epoch);
    if (existing) return existing;
    const newest = Math.max(-1, ...this.epochs.keys());
    if (epoch < newest - (OPEN_EPOCHS - 1)) return null;
    const counts = new Array<number>(this.dataset.trainShards).fill(0);
    this.epochs.set(epoch, counts);
    for (const old of [...this.epochs.keys()].sort((a, b) => a - b)) {
      if (this.epochs.size <= OPEN_EPOCHS) break;
      this.epochs.delete(old);
    }
    return this.epochs.get(epoch) ?? null;
  }

  private owns(peer: PeerId, epoch: number, shard: number, members: readonly PeerId[]): boolean {
    const key = members.join('\n');
    if (!this.assigned || this.assigned.members !== key || this.assigned.epoch !== epoch) {
      const owner = new Map<number, PeerId>();
      const assignment = assignShards(this.dataset.trainShards, members, { seed: this.config.data.seed, epoch });
      for (const [member, shards] of assignment) for (const s of shards) owner.set(s, member);
      this.assigned = { members: key, epoch, owner };
    }
    return this.assigned.owner.get(shard) === peer;
  }
}

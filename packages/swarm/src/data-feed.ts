/**
 * A volunteer's batches in a dataset room: a ShardWalker over the training shards the room's
 * assignment gives it, following the coordinator's rosters (who trains, and the ledger of what
 * has been drawn), and the positions its heartbeats report. docs/data.md.
 */
import { type Batch, type Dataset, ShardWalker, type WalkerState } from '@shoal/data';
import type { PeerId, RosterMessage, RunConfig, ShardPosition } from '@shoal/protocol';
import { dataMembers, drawnIn } from './data-ledger.ts';
import type { Member } from './member.ts';

/** Positions a heartbeat carries at most (the protocol's bound). */
const MAX_POSITIONS = 16;

/** Tries at a shard before a volunteer gives up on it (draw). */
const FETCH_ATTEMPTS = 4;

/** A volunteer started drawing from a shard: where, and the shard bytes it holds against its budget. */
export interface ShardStart {
  epoch: number;
  shard: number;
  /** Batches of it the room had drawn already (it moved here from another volunteer, or a resume). */
  from: number;
  heldBytes: number;
  budgetBytes: number;
}

export class DataFeed {
  private walker: ShardWalker | null = null;
  private readonly ready: Promise<ShardWalker>;
  private resolveReady: (walker: ShardWalker) => void = () => {};
  private rejectReady: (error: Error) => void = () => {};
  private failed: Error | null = null;
  private rosterEpoch = -1;
  /** Shards drawn from since the last heartbeat, by `epoch:shard`, latest last. */
  private readonly positions = new Map<string, ShardPosition>();
  private readonly unsubscribe: () => void;
  /** The `epoch:shard` it draws from. */
  private drawing = '';
  /** Shard fetches that failed (and were tried again, or ended its training). */
  fetchFailures = 0;

  constructor(
    readonly dataset: Dataset,
    private readonly config: RunConfig,
    private readonly member: Member,
    coordinator: PeerId,
    /** The coordinator's latest roster before the feed existed (the dataset took a while to open). */
    initial: RosterMessage | null,
    private readonly onShard: (start: ShardStart) => void = () => {},
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => {}); // seen by next()
    const take = (roster: RosterMessage) => {
      if (roster.epoch <= this.rosterEpoch || this.failed) return;
      this.rosterEpoch = roster.epoch;
      try {
        this.follow(roster);
      } catch (error) {
        // the next batch says why (a roster this dataset cannot be dealt by): the worker stops on it
        this.failed = error as Error;
        this.rejectReady(this.failed);
      }
    };
    this.unsubscribe = member.on('roster', (from, roster) => {
      if (from === coordinator) take(roster);
    });
    if (initial) take(initial);
  }

  /** The walker's counters (fetch waits, prefetches, bytes held); null before the first roster. */
  get stats(): ShardWalker['stats'] | null {
    return this.walker?.stats ?? null;
  }

  /** The walker's position and what it knows the room drew (null before the first roster). */
  state(): WalkerState | null {
    return this.walker?.state() ?? null;
  }

  /** The next batch: waits for the first roster that deals this volunteer shards, then for its shard. */
  async next(): Promise<Batch> {
    if (this.failed) throw this.failed;
    const walker = await this.ready;
    const batch = await this.draw(walker);
    const { epoch, shard, batch: drawn } = walker.state();
    if (shard !== null) {
      const key = `${epoch}:${shard}`;
      if (key !== this.drawing) {
        this.drawing = key;
        const budgetBytes = this.dataset.cache?.budgetBytes ?? walker.heldBytes;
        this.onShard({ epoch, shard, from: drawn - 1, heldBytes: walker.heldBytes, budgetBytes });
      }
      this.positions.delete(key);
      this.positions.set(key, { epoch, shard, drawn });
    }
    return batch;
  }

  /**
   * A batch, asking again for a shard that could not be fetched or failed its hash (the walker
   * fetches it anew, from the next source that has it), after 1, 2 and 4 s; then the error, which
   * ends this volunteer's training with a sentence for a person. Nothing unverified is drawn.
   */
  private async draw(walker: ShardWalker): Promise<Batch> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await walker.next();
      } catch (error) {
        this.fetchFailures++;
        if (attempt >= FETCH_ATTEMPTS) {
          throw new Error(`no batch after ${attempt} tries to fetch a shard: ${(error as Error).message}`);
        }
        await this.member.clock.sleep(1000 * 2 ** (attempt - 1));
      }
    }
  }

  /** Where it stands in the shards it drew from since the last call (the current one stays). */
  heartbeatPositions(): ShardPosition[] {
    const list = [...this.positions.values()].slice(-MAX_POSITIONS);
    const current = list.at(-1);
    this.positions.clear();
    if (current) this.positions.set(`${current.epoch}:${current.shard}`, current);
    return list;
  }

  stop(): void {
    this.unsubscribe();
  }

  private follow(roster: RosterMessage): void {
    const members = dataMembers(roster.members);
    if (!members.includes(this.member.self)) return; // not training (yet): nothing is dealt to it
    if (this.walker) {
      this.walker.setMembers(members, drawnIn(roster.data, this.walker.epoch));
      return;
    }
    // A newcomer starts in the oldest epoch the room still draws from, where the ledger says.
    const open = roster.data?.epochs.map((entry) => entry.epoch) ?? [];
    const epoch = open.length > 0 ? Math.min(...open) : 0;
    const { batchSize, seqLen } = this.config.train;
    this.walker = new ShardWalker(this.dataset, {
      batchSize,
      seqLen,
      seed: this.config.data.seed,
      member: this.member.self,
      members,
      epoch,
      drawn: drawnIn(roster.data, epoch),
    });
    this.resolveReady(this.walker);
  }
}

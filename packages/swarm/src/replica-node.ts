/**
 * The replica's side of the protocol, shared by workers and the host: follows round-open,
 * shard-result, commit and abort into ReplicaState; reports tentative hashes; serves and fetches
 * fragment state (late joiners, diverged replicas). Messages that arrive before the round they
 * belong to (links differ in latency) wait in a small buffer.
 */
import type { Fragment } from '@shoal/diloco';
import type {
  CommitMessage,
  PeerId,
  RoundOpenMessage,
  ShardResultMessage,
  StateTransferMessage,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState } from './replica.ts';

/** Values per state-transfer part: 8 bytes each (θ and m), 8 MiB per message. */
export const STATE_PART_VALUES = 1 << 20;
/** Early messages kept per replica before their round-open arrives. */
const MAX_EARLY = 256;

export interface ReplicaEvents {
  /** Round-open seen (after the replica state opened it). */
  opened?(message: RoundOpenMessage): void;
  /** A round committed and this replica adopted it. */
  committed?(fragment: number, round: number, message: CommitMessage): void;
  /** A round aborted. */
  aborted?(fragment: number, round: number): void;
  /** This replica's state for a fragment is wrong or missing: it is fetching it. */
  diverged?(fragment: number): void;
  /** A fetched fragment was installed (hash checked). */
  synced?(fragment: number): void;
}

/**
 * A result shard adopted into round (fragment, round): `received` of its `total` shards are in.
 * The first marks the owners' reduce done, the last the all-gather (the host's round timeline).
 */
export type ResultShardListener = (fragment: number, round: number, received: number, total: number) => void;

interface Transfer {
  round: number;
  hash: string;
  theta: Float32Array;
  momentum: Float32Array;
  received: number;
}

export class ReplicaNode {
  private readonly early: { from: PeerId; message: ShardResultMessage }[] = [];
  private readonly transfers = new Map<number, Transfer>();
  /** Fragments whose state is being fetched: their rounds are not followed meanwhile. */
  readonly fetching = new Set<number>();
  /** The latest round-open and commit of each fragment being fetched, replayed once it arrives. */
  private readonly held = new Map<number, { open?: RoundOpenMessage; commit?: CommitMessage }>();
  private readonly resultShardListeners = new Set<ResultShardListener>();

  constructor(
    private readonly member: Member,
    readonly state: ReplicaState,
    /** Where hash reports go; null on the coordinator itself (it reads its own hashes). */
    private readonly coordinator: () => PeerId,
    private readonly events: ReplicaEvents = {},
    /** Where a diverged fragment is fetched from: the coordinator (the host), or for the host a contributor. */
    private readonly stateSource: (commit: CommitMessage | null) => PeerId = () => coordinator(),
  ) {
    member.on('round-open', (from, message) => this.onOpen(from, message));
    member.on('shard-result', (from, message) => this.onShardResult(from, message));
    member.on('commit', (_from, message) => this.onCommit(message));
    member.on('abort', (_from, message) => {
      this.state.abort(message.fragment, message.round);
      this.events.aborted?.(message.fragment, message.round);
    });
    member.on('state-request', (from, message) => this.serveState(from, message.fragment, message.start, message.end));
    member.on('state-transfer', (from, message) => this.onTransfer(from, message));
  }

  get fragments(): Fragment[] {
    return this.state.fragments.map((f) => f.fragment);
  }

  /** Calls `listener` for every result shard this replica adopts; returns the unsubscribe. */
  onResultShard(listener: ResultShardListener): () => void {
    this.resultShardListeners.add(listener);
    return () => this.resultShardListeners.delete(listener);
  }

  /** Fetches every fragment in `fragments` from `from` (a late joiner, a diverged replica). */
  fetch(from: PeerId, fragments: number[]): void {
    for (const p of fragments) {
      if (this.fetching.has(p)) continue;
      this.fetching.add(p);
      this.transfers.delete(p);
      const size = this.state.fragment(p).fragment.size;
      for (let start = 0; start < size; start += STATE_PART_VALUES) {
        void this.member.send(from, {
          kind: 'state-request',
          fragment: p,
          start,
          end: Math.min(size, start + STATE_PART_VALUES),
        });
      }
    }
  }

  private onOpen(from: PeerId, message: RoundOpenMessage): void {
    if (from !== this.coordinator()) {
      this.member.refuse(from, 'round-open', 'not-coordinator', `${from} does not coordinate this room`);
      return;
    }
    const p = message.fragment;
    if (this.fetching.has(p)) {
      this.held.set(p, { ...this.held.get(p), open: message });
      return;
    }
    const current = this.state.fragment(p);
    if (message.baseHash !== current.hash) {
      // This replica missed a commit: its θ_global[p] is stale.
      this.events.diverged?.(p);
      this.fetch(this.stateSource(null), [p]);
      return;
    }
    if (message.round <= current.round) return;
    this.state.openRound(p, message.round, message.codec, message.blockSize, message.shards);
    this.events.opened?.(message);
    const waiting = this.early.filter((e) => e.message.fragment === p && e.message.round === message.round);
    for (const entry of waiting) {
      this.early.splice(this.early.indexOf(entry), 1);
      this.onShardResult(entry.from, entry.message);
    }
  }

  private onShardResult(from: PeerId, message: ShardResultMessage): void {
    const { fragment: p, round, shard } = message;
    if (p >= this.state.fragments.length) {
      this.member.refuse(from, 'shard-result', 'no-such-fragment', `fragment ${p}`);
      return;
    }
    if (!this.state.isOpen(p, round)) {
      if (round > this.state.fragment(p).round && this.early.length < MAX_EARLY) this.early.push({ from, message });
      else this.member.refuse(from, 'shard-result', 'stale-round', `round ${round} of fragment ${p} is not open`);
      return;
    }
    if (message.payload.byteLength === 0) return; // nothing accepted: the round will abort
    let outcome: ReturnType<ReplicaState['addShardResult']>;
    try {
      outcome = this.state.addShardResult(p, round, shard, message.payload);
    } catch (error) {
      this.member.refuse(from, 'shard-result', 'codec', (error as Error).message);
      return;
    }
    if (outcome.status === 'ignored') {
      this.member.refuse(from, 'shard-result', outcome.reason, `shard ${shard} of round ${round}`);
      return;
    }
    if (outcome.status === 'complete') {
      void this.member.send(this.coordinator(), { kind: 'hash-report', fragment: p, round, hash: outcome.hash });
    }
    const received = outcome.shards - (outcome.status === 'waiting' ? outcome.missing : 0);
    for (const listener of this.resultShardListeners) {
      try {
        listener(p, round, received, outcome.shards);
      } catch (error) {
        // an observer's bug is counted, never allowed to cost the replica its round
        this.member.refuse(this.member.self, 'shard-result', 'handler-error', String(error));
      }
    }
  }

  private onCommit(message: CommitMessage): void {
    const { fragment: p, round } = message;
    if (this.fetching.has(p)) {
      this.held.set(p, { ...this.held.get(p), commit: message });
      return;
    }
    const outcome = this.state.commit(p, round, message.hash);
    this.dropEarly(p);
    if (outcome === 'adopted') this.events.committed?.(p, round, message);
    else if (outcome === 'diverged') {
      this.events.diverged?.(p);
      this.fetch(this.stateSource(message), [p]);
    }
  }

  /**
   * Forgets early results of rounds of p at or before its state's round: they can never be used
   * (a fetch overtook their round), and left in the bounded buffer they would crowd out real ones.
   */
  private dropEarly(p: number): void {
    const round = this.state.fragment(p).round;
    for (let i = this.early.length - 1; i >= 0; i--) {
      const { message } = this.early[i] as { message: ShardResultMessage };
      if (message.fragment === p && message.round <= round) this.early.splice(i, 1);
    }
  }

  private serveState(from: PeerId, p: number, start: number, end: number): void {
    const fragment = this.state.fragments[p];
    if (!fragment || end > fragment.fragment.size || this.fetching.has(p)) {
      this.member.refuse(from, 'state-request', 'unavailable', `fragment ${p} [${start}, ${end}) is not served here`);
      return;
    }
    void this.member.send(from, {
      kind: 'state-transfer',
      fragment: p,
      round: fragment.round,
      start,
      end,
      fragmentSize: fragment.fragment.size,
      hash: fragment.hash,
      roomTokens: 0,
      payload: this.state.exportRange(p, start, end),
    });
  }

  private onTransfer(from: PeerId, message: StateTransferMessage): void {
    const { fragment: p, start, end, round, hash } = message;
    if (!this.fetching.has(p) || p >= this.state.fragments.length) {
      this.member.refuse(from, 'state-transfer', 'unrequested', `fragment ${p}`);
      return;
    }
    const size = this.state.fragment(p).fragment.size;
    if (message.fragmentSize !== size) {
      this.member.refuse(
        from,
        'state-transfer',
        'size',
        `fragment ${p} has ${size} values, not ${message.fragmentSize}`,
      );
      return;
    }
    let transfer = this.transfers.get(p);
    if (!transfer || transfer.round !== round || transfer.hash !== hash) {
      // A commit happened between parts: start over on the newer state.
      transfer = { round, hash, theta: new Float32Array(size), momentum: new Float32Array(size), received: 0 };
      this.transfers.set(p, transfer);
      if (start !== 0) {
        this.fetching.delete(p);
        this.fetch(from, [p]);
        return;
      }
    }
    const values = new Float32Array(message.payload.slice().buffer);
    const n = end - start;
    transfer.theta.set(values.subarray(0, n), start);
    transfer.momentum.set(values.subarray(n, 2 * n), start);
    transfer.received += n;
    if (transfer.received < size) return;
    this.transfers.delete(p);
    this.fetching.delete(p);
    const held = this.held.get(p);
    this.held.delete(p);
    if (this.state.importState(p, round, transfer.theta, transfer.momentum, hash)) {
      this.dropEarly(p);
      this.events.synced?.(p);
      // Catch up with the round that opened during the transfer: its base is, most likely, the
      // state just installed, and its shard results wait in the early buffer. Without this, a
      // replica whose transfers take longer than a round would fetch forever.
      if (held?.open && held.open.round > round) this.onOpen(this.coordinator(), held.open);
      if (held?.commit && held.commit.round > round && !this.fetching.has(p)) this.onCommit(held.commit);
    } else {
      this.member.refuse(from, 'state-transfer', 'hash', `fragment ${p} does not hash to ${hash}`);
      this.fetch(from, [p]);
    }
  }
}

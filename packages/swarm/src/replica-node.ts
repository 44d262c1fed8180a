/**
 * The replica's side of the protocol, shared by workers and the host: follows round-open,
 * shard-result, commit and abort into ReplicaState; reports tentative hashes; fetches fragment
 * state (late joiners, diverged replicas) and, on the host, serves it (state-server.ts).
 *
 * A peer's message is a claim (docs/hostile-volunteers.md): round-open, commit and abort count
 * only from the coordinator; a shard result only from the owner, checker or referee the round
 * named for that shard; a state transfer only from the peer asked, and only for a hash the
 * coordinator named. Results that arrive before their round-open (links differ in latency) wait
 * in a small buffer, for the round after the last one opened only, a few per peer.
 */
import { type Fragment, lowRankPayloadSize } from '@shoal/diloco';
import {
  type CommitMessage,
  type PeerId,
  type RoundOpenMessage,
  type ShardResultMessage,
  STATE_PART_VALUES,
  type StateTransferMessage,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState, ShardSource } from './replica.ts';
import { roundCodec } from './round-codec.ts';
import { resultHashOf } from './shard-duty.ts';
import { StateServer } from './state-server.ts';

/** Early shard results kept per sender: its shards of the next round of two fragments. */
const EARLY_PER_PEER = 4;
/** Hashes the coordinator named per fragment that a state transfer may match (the newest ones). */
const TRUSTED_HASHES = 8;
/** After a refusal by quota, ask again this much later (the fragment will have moved on by then). */
const STATE_RETRY_MS = 2_000;

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
  /** Shard k's owner and checker sent results that differ (the host referees it). */
  disputed?(fragment: number, round: number, shard: number): void;
}

export interface ReplicaNodeOptions {
  /** Where hash reports go (the coordinator; the host sends its own to itself). */
  coordinator: () => PeerId;
  events?: ReplicaEvents;
  /** Where a diverged fragment is fetched from: the coordinator; null: nowhere (the host). */
  stateSource?: () => PeerId | null;
  /** The host serves state to joiners; nobody has reason to ask a worker. */
  servesState?: boolean;
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

const roundKey = (fragment: number, round: number) => `${fragment}:${round}`;

export class ReplicaNode {
  private readonly early: { from: PeerId; message: ShardResultMessage }[] = [];
  private readonly transfers = new Map<number, Transfer>();
  /** Fragments whose state is being fetched: their rounds are not followed meanwhile. */
  readonly fetching = new Set<number>();
  /** Who each fetch asked: a transfer from anyone else is refused. */
  private readonly requestedFrom = new Map<number, PeerId>();
  /** Hashes the coordinator named per fragment (welcome, round bases, commits), newest last. */
  private readonly trusted = new Map<number, string[]>();
  /** The latest round-open and commit of each fragment being fetched, replayed once it arrives. */
  private readonly held = new Map<number, { open?: RoundOpenMessage; commit?: CommitMessage }>();
  /** Round-opens of the rounds open here: who may send which shard's result. */
  private readonly opens = new Map<string, RoundOpenMessage>();
  /** Commits that arrived while their round's verified results were still on the way. */
  private readonly waitingCommits = new Map<string, CommitMessage>();
  /** Round-opens whose base is a waiting commit, by that commit's round key: opened once it applies. */
  private readonly openAfterCommit = new Map<string, RoundOpenMessage>();
  /** Verified shards per open round, as last told to the result-shard listeners. */
  private readonly verifiedShards = new Map<string, number>();
  /** The newest round opened here, per fragment. */
  private readonly latestOpened = new Map<number, number>();
  /** Serves its fragments' state to the replicas that ask (the host's; a worker's refuses). */
  private readonly server: StateServer;
  private readonly resultShardListeners = new Set<ResultShardListener>();
  private readonly coordinator: () => PeerId;
  private readonly events: ReplicaEvents;

  constructor(
    private readonly member: Member,
    readonly state: ReplicaState,
    private readonly options: ReplicaNodeOptions,
  ) {
    this.coordinator = options.coordinator;
    this.events = options.events ?? {};
    for (const [p, f] of state.fragments.entries()) this.trust(p, f.hash);
    member.on('round-open', (from, message) => this.onOpen(from, message));
    member.on('shard-result', (from, message) => this.onShardResult(from, message));
    member.on('commit', (from, message) => {
      if (this.fromCoordinator(from, 'commit')) this.onCommit(message);
    });
    member.on('abort', (from, message) => {
      if (!this.fromCoordinator(from, 'abort')) return;
      const key = roundKey(message.fragment, message.round);
      this.opens.delete(key);
      this.waitingCommits.delete(key);
      this.openAfterCommit.delete(key);
      this.verifiedShards.delete(key);
      this.state.abort(message.fragment, message.round);
      this.events.aborted?.(message.fragment, message.round);
    });
    this.server = new StateServer(member, state, options.servesState ?? false, this.fetching);
    member.on('state-request', (from, message) =>
      this.server.serve(from, message.fragment, message.start, message.end),
    );
    // Over its quota at the state source: ask again once the quota has room.
    member.on('rejected', (from, message) => {
      const p = message.fragment;
      if (message.about !== 'state-request' || p === undefined || this.requestedFrom.get(p) !== from) return;
      this.fetching.delete(p);
      this.requestedFrom.delete(p);
      member.clock.setTimer(STATE_RETRY_MS, () => {
        if (!this.fetching.has(p)) this.fetch(from, [p]);
      });
    });
    member.on('state-transfer', (from, message) => this.onTransfer(from, message));
  }

  get fragments(): Fragment[] {
    return this.state.fragments.map((f) => f.fragment);
  }

  /**
   * A hash the coordinator named for fragment p (a welcome's) at `round`: state matching it may be
   * installed, and results of the round after it may arrive before that round's open.
   */
  trust(p: number, hash: string, round = 0): void {
    if (round > (this.latestOpened.get(p) ?? 0)) this.latestOpened.set(p, round);
    const list = this.trusted.get(p) ?? [];
    if (!list.includes(hash)) list.push(hash);
    if (list.length > TRUSTED_HASHES) list.shift();
    this.trusted.set(p, list);
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
      this.requestedFrom.set(p, from);
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

  private fromCoordinator(from: PeerId, kind: 'round-open' | 'commit' | 'abort'): boolean {
    if (from === this.coordinator()) return true;
    this.member.refuse(from, kind, 'not-coordinator', `${from} does not coordinate this room`);
    return false;
  }

  /** Fragment p's state is stale or wrong: fetch it from the state source, if there is one. */
  resync(p: number): void {
    this.events.diverged?.(p);
    const source = this.options.stateSource ? this.options.stateSource() : this.coordinator();
    if (source !== null && source !== this.member.self) this.fetch(source, [p]);
  }

  private onOpen(from: PeerId, message: RoundOpenMessage): void {
    if (!this.fromCoordinator(from, 'round-open')) return;
    const p = message.fragment;
    if (p >= this.state.fragments.length) {
      this.member.refuse(from, 'round-open', 'no-such-fragment', `fragment ${p}`);
      return;
    }
    const { fragment } = this.state.fragment(p);
    const size = message.lowRank ? lowRankPayloadSize(fragment.tensors, message.lowRank) : fragment.size;
    if (message.fragmentSize !== size) {
      const what = message.lowRank ? `a rank-${message.lowRank.rank} ${message.lowRank.side} payload` : 'fragment';
      this.member.refuse(from, 'round-open', 'size', `${what} ${p} has ${size} values, not ${message.fragmentSize}`);
      return;
    }
    this.trust(p, message.baseHash);
    if (message.round > (this.latestOpened.get(p) ?? 0)) this.latestOpened.set(p, message.round);
    if (!this.state.follows(p)) return; // another pipeline stage's fragment
    if (this.fetching.has(p)) {
      this.held.set(p, { ...this.held.get(p), open: message });
      return;
    }
    const current = this.state.fragment(p);
    if (message.baseHash !== current.hash) {
      // Its base is a commit this replica holds but cannot apply yet (its verified results are
      // still arriving, from other peers than the commit): open it right after that commit.
      const waiting = [...this.waitingCommits.values()].find((c) => c.fragment === p && c.hash === message.baseHash);
      if (waiting) {
        this.openAfterCommit.set(roundKey(p, waiting.round), message);
        return;
      }
      // This replica missed a commit: its θ_global[p] is stale. The state it fetches is most
      // likely this round's base: it follows the round once that is in (its hash report then
      // counts, and the commit finds it current), instead of finding itself behind again there.
      this.resync(p);
      if (this.fetching.has(p)) this.held.set(p, { ...this.held.get(p), open: message });
      return;
    }
    if (message.round <= current.round) return;
    this.state.openRound(p, message.round, roundCodec(message), message.shards, message.lowRank);
    this.opens.set(roundKey(p, message.round), message);
    this.events.opened?.(message);
    const waiting = this.early.filter((e) => e.message.fragment === p && e.message.round === message.round);
    for (const entry of waiting) {
      this.early.splice(this.early.indexOf(entry), 1);
      this.onShardResult(entry.from, entry.message);
    }
  }

  /** Which aggregator of its shard a result comes from, or null when the sender was not named for it. */
  private sourceOf(from: PeerId, open: RoundOpenMessage, message: ShardResultMessage): ShardSource | null {
    const shard = open.shards[message.shard];
    if (!shard) return null;
    if (message.check) return from === shard.checker ? 'checker' : null;
    if (from === this.coordinator()) return 'referee';
    return from === shard.owner ? 'owner' : null;
  }

  private onShardResult(from: PeerId, message: ShardResultMessage): void {
    const { fragment: p, round, shard } = message;
    if (p >= this.state.fragments.length) {
      this.member.refuse(from, 'shard-result', 'no-such-fragment', `fragment ${p}`);
      return;
    }
    if (!this.state.follows(p)) return; // owners send results to every replica
    const open = this.opens.get(roundKey(p, round));
    if (!open || !this.state.isOpen(p, round)) {
      // the current round (opened while this replica was fetching) or the next one may wait
      const next = (this.latestOpened.get(p) ?? 0) + 1;
      const queued = this.early.filter((e) => e.from === from).length;
      if (round >= next - 1 && round <= next && queued < EARLY_PER_PEER) this.early.push({ from, message });
      else {
        const reason = round > next ? 'future-round' : 'stale-round';
        this.member.refuse(from, 'shard-result', reason, `round ${round} of fragment ${p} is not open`);
      }
      return;
    }
    const source = this.sourceOf(from, open, message);
    if (!source) {
      this.member.refuse(
        from,
        'shard-result',
        'not-owner',
        `${from} was not named for shard ${shard} of ${p}:${round}`,
      );
      return;
    }
    // Bytes of another codec can decode as the round's (int4 and fp4 have the same layout).
    if (message.codec !== open.codec) {
      const detail = `shard ${shard} of ${p}:${round} says ${message.codec}, the round's codec is ${open.codec}`;
      this.member.refuse(from, 'shard-result', 'codec', detail);
      return;
    }
    if (source !== 'checker' && message.payload.byteLength === 0) return; // nothing accepted: the round will abort
    const accepted = message.verdicts.filter((v) => v.reason === '').map((v) => v.peer);
    const once = { memo: this.state.memo, scope: { fragment: p, round }, shard }; // per payload, with a memo
    const hashed = () => resultHashOf(this.state.hasher, message.payload, accepted, once);
    const resultHash = source === 'checker' ? (message.resultHash ?? '') : hashed();
    if (message.resultHash !== undefined && message.resultHash !== resultHash) {
      this.member.refuse(
        from,
        'shard-result',
        'result-hash',
        `shard ${shard} of ${p}:${round} does not hash to its claim`,
      );
      return;
    }
    let outcome: ReturnType<ReplicaState['addShardResult']>;
    try {
      outcome = this.state.addShardResult(p, round, shard, source, { payload: message.payload, resultHash, accepted });
    } catch (error) {
      this.member.refuse(from, 'shard-result', 'codec', (error as Error).message);
      return;
    }
    switch (outcome.status) {
      case 'ignored':
        // an owner's result after the host refereed its shard is late, not bad
        if (outcome.reason !== 'late') {
          this.member.refuse(from, 'shard-result', outcome.reason, `shard ${shard} of round ${round}`);
        }
        return;
      case 'disputed':
        this.events.disputed?.(p, round, shard);
        return;
      case 'refused':
        this.member.refuse(from, 'shard-result', outcome.reason, outcome.message);
        return;
    }
    if (outcome.status === 'complete') {
      void this.member.send(this.coordinator(), { kind: 'hash-report', fragment: p, round, hash: outcome.hash });
      const commit = this.waitingCommits.get(roundKey(p, round));
      if (commit) this.onCommit(commit);
    }
    const received = outcome.shards - (outcome.status === 'waiting' ? outcome.missing : 0);
    // an owner's result that waits for its checker verifies nothing yet
    const key = roundKey(p, round);
    if (received <= (this.verifiedShards.get(key) ?? 0)) return;
    this.verifiedShards.set(key, received);
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
    if (p >= this.state.fragments.length) return;
    this.trust(p, message.hash);
    if (!this.state.follows(p)) return;
    if (this.fetching.has(p)) {
      this.held.set(p, { ...this.held.get(p), commit: message });
      return;
    }
    const key = roundKey(p, round);
    const outcome = this.state.commit(p, round, message.hash);
    if (outcome === 'waiting') {
      this.waitingCommits.set(key, message); // applied when the last verified result is in
      return;
    }
    this.waitingCommits.delete(key);
    this.opens.delete(key);
    this.verifiedShards.delete(key);
    this.dropEarly(p);
    const next = this.openAfterCommit.get(key);
    this.openAfterCommit.delete(key);
    if (outcome === 'adopted') this.events.committed?.(p, round, message);
    else if (outcome === 'diverged') {
      this.resync(p);
    }
    if (next && outcome === 'adopted') this.onOpen(this.coordinator(), next);
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

  private onTransfer(from: PeerId, message: StateTransferMessage): void {
    const { fragment: p, start, end, round, hash } = message;
    if (!this.fetching.has(p) || p >= this.state.fragments.length || this.requestedFrom.get(p) !== from) {
      this.member.refuse(from, 'state-transfer', 'unrequested', `fragment ${p} was not asked of ${from}`);
      return;
    }
    // The coordinator's word is the room's (a joiner may miss the commit it serves); anyone else's
    // state must match a hash the coordinator named.
    if (from !== this.coordinator() && !this.trusted.get(p)?.includes(hash)) {
      this.member.refuse(from, 'state-transfer', 'untrusted-hash', `the coordinator never named ${hash} for ${p}`);
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
    this.requestedFrom.delete(p);
    const held = this.held.get(p);
    this.held.delete(p);
    if (this.state.importState(p, round, transfer.theta, transfer.momentum, hash)) {
      for (const key of [...this.opens.keys()]) if (key.startsWith(`${p}:`)) this.opens.delete(key);
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

/**
 * The host's side of a state transfer: it serves a fragment's committed θ_global and m, in parts,
 * to a replica that asks (a late joiner, a diverged replica), and no more of it per committed
 * round than a replica needs. A worker serves nobody: nobody has reason to ask it.
 */
import type { PeerId } from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState } from './replica.ts';

/**
 * State a peer may ask the host for: each fragment at most twice per committed round of it (a
 * joiner or a diverged replica needs it once, a retry once more). That is no more than the round's
 * results it receives anyway, so 71 bytes of request cannot buy megabytes without end.
 */
const STATE_COPIES_PER_ROUND = 2;

export class StateServer {
  /** Values of each fragment served to each peer at its current round ("peer:p" → round, values). */
  private readonly served = new Map<string, { round: number; values: number }>();

  constructor(
    private readonly member: Member,
    private readonly state: ReplicaState,
    /** Whether it serves state at all (the host's replica does). */
    private readonly serves: boolean,
    /** Fragments its replica is fetching itself: it has no state of them to serve. */
    private readonly fetching: ReadonlySet<number>,
  ) {}

  /** Answers `from`'s request for values [start, end) of fragment p: the state, or a refusal. */
  serve(from: PeerId, p: number, start: number, end: number): void {
    const fragment = this.state.fragments[p];
    if (!this.serves) {
      this.member.rejectBack(from, 'state-request', 'not-served', 'only the host serves state', { fragment: p });
      return;
    }
    if (!fragment || end > fragment.fragment.size || this.fetching.has(p)) {
      this.member.refuse(from, 'state-request', 'unavailable', `fragment ${p} [${start}, ${end}) is not served here`);
      return;
    }
    if (!this.withinQuota(from, p, end - start)) {
      this.member.rejectBack(from, 'state-request', 'quota', `${from} asked for more state than a replica needs`, {
        fragment: p,
      });
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

  /** Counts `values` of fragment p served to `peer`; false when that is over its quota for p's round. */
  private withinQuota(peer: PeerId, p: number, values: number): boolean {
    const { round, fragment } = this.state.fragment(p);
    const key = `${peer}:${p}`;
    const entry = this.served.get(key);
    const served = entry?.round === round ? entry.values : 0;
    if (served + values > STATE_COPIES_PER_ROUND * fragment.size) return false;
    this.served.set(key, { round, values: served + values });
    return true;
  }
}

/**
 * What honest members hold on the attackers' account, measured from outside the swarm:
 * - future-round buffers: payload messages (contributions, shard results) from a hostile peer for
 *   rounds ≥ 2 beyond the latest open one that a victim kept, i.e. its refusal count against the
 *   sender did not move while it handled the message (early buffers keep those until their round
 *   opens, which it never does);
 * - uplinks: state transfers a victim has queued towards a hostile peer and not yet delivered,
 *   and how many bytes of those answer one byte of the hostile peers' state requests.
 * Near-round early messages and reassembly buffers are not visible from here: they need a hook
 * inside swarm (bytes held per peer).
 */
import { HEADER_OFFSETS, MESSAGE_SPECS, type PeerId } from '@shoal/protocol';
import type { Member } from '@shoal/swarm';
import type { SimNetwork } from '../index.ts';

const STATE_TRANSFER = MESSAGE_SPECS['state-transfer'].id;
const STATE_REQUEST = MESSAGE_SPECS['state-request'].id;

/**
 * Bytes of payload messages (contributions, shard results) from hostile peers for rounds ≥ 2
 * beyond the latest open one that a victim kept: its refusal count against the sender did not
 * move while it handled the message. Checked before the victim's handlers run and settled just
 * before the next such message (or on a microtask), so each message is judged on its own.
 */
export class FutureRoundMeter {
  private pending: { victim: Member; from: PeerId; refusals: number; bytes: number } | null = null;

  private readonly bytes = new Map<PeerId, number>();

  constructor(
    private readonly hostile: ReadonlySet<PeerId>,
    private readonly latestRound: (fragment: number) => number,
  ) {}

  /** Bytes `peer` kept so far. */
  held(peer: PeerId): number {
    return this.bytes.get(peer) ?? 0;
  }

  /** Call before any handler of `member`'s is registered. */
  watch(member: Member): void {
    const check = (from: PeerId, message: { fragment: number; round: number; payload: Uint8Array }) => {
      if (!this.hostile.has(from) || message.round < this.latestRound(message.fragment) + 2) return;
      this.flush();
      this.pending = {
        victim: member,
        from,
        refusals: member.counters.byPeer()[from] ?? 0,
        bytes: message.payload.byteLength,
      };
      queueMicrotask(() => this.flush());
    };
    member.on('contribution', check);
    member.on('shard-result', check);
  }

  flush(): void {
    const pending = this.pending;
    if (!pending) return;
    this.pending = null;
    if ((pending.victim.counters.byPeer()[pending.from] ?? 0) !== pending.refusals) return;
    const self = pending.victim.self;
    this.bytes.set(self, this.held(self) + pending.bytes);
  }
}

/** State transfers queued from honest members towards hostile peers, and what those asked for. */
export class UplinkMeter {
  private readonly bytes = new Map<PeerId, number>();
  private asked = 0;
  private answered = 0;

  constructor(network: SimNetwork, hostile: readonly { peer: PeerId; member: Member }[], honest: readonly Member[]) {
    const hostileIds = new Set(hostile.map((h) => h.peer));
    for (const member of honest) {
      network.onSend(member.self, (to, bytes) => {
        if (hostileIds.has(to) && bytes[HEADER_OFFSETS.kind] === STATE_TRANSFER) {
          this.bytes.set(member.self, this.queued(member.self) + bytes.byteLength);
          this.answered += bytes.byteLength;
        }
        return 'deliver';
      });
    }
    for (const h of hostile) {
      network.onSend(h.peer, (_to, bytes) => {
        if (bytes[HEADER_OFFSETS.kind] === STATE_REQUEST) this.asked += bytes.byteLength;
        return 'deliver';
      });
      h.member.transport.on('message', (from, bytes) => {
        if (bytes[HEADER_OFFSETS.kind] === STATE_TRANSFER && this.bytes.has(from)) {
          this.bytes.set(from, this.queued(from) - bytes.byteLength);
        }
      });
    }
  }

  /** Bytes `peer` has sent towards hostile peers that have not arrived yet. */
  queued(peer: PeerId): number {
    return Math.max(0, this.bytes.get(peer) ?? 0);
  }

  /** State-transfer bytes sent to hostile peers per state-request byte they sent; null if none asked. */
  amplification(): number | null {
    return this.asked > 0 ? this.answered / this.asked : null;
  }
}

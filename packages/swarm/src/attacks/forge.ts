/**
 * Forging on the wire, from outside the swarm: rewriting a hostile peer's outgoing messages
 * (decode, change, encode again) and sending messages it made up. Forged bytes are remembered so
 * that the hooks (the referee's, the attack's own) let them through untouched.
 */
import { createCodec } from '@shoal/diloco';
import {
  HEADER_OFFSETS,
  MESSAGE_SPECS,
  type Message,
  type MessageKind,
  type MessageOf,
  type PeerId,
  type WireCodec,
} from '@shoal/protocol';
import type { SimNetwork } from '../sim/index.ts';
import type { AttackContext, HostilePeer, Rewritten } from './types.ts';

export class Forger {
  readonly forged = new WeakSet<Uint8Array>();
  /** Messages an attack made up that would not encode (its own bug): reported, never thrown. */
  readonly failures: string[] = [];

  constructor(
    private readonly network: SimNetwork,
    private readonly codec: WireCodec,
    private readonly runId: number,
    private readonly isActive: () => boolean,
  ) {}

  /** Sends `message` from `from` as the attacker made it. A peer that is down just loses it. */
  forge(from: PeerId, to: PeerId, message: Message): void {
    const transport = this.network.transport(from);
    if (!transport) return;
    let bytes: Uint8Array;
    try {
      bytes = this.codec.encode(message, this.runId);
    } catch (error) {
      if (this.failures.length < 4) this.failures.push(`${message.kind}: ${(error as Error).message}`);
      return;
    }
    this.forged.add(bytes);
    transport.send(to, bytes).catch(() => {});
  }

  /** See AttackContext.rewrite. */
  rewrite<K extends MessageKind>(
    peer: PeerId,
    kind: K,
    change: (to: PeerId, message: MessageOf<K>) => Rewritten,
  ): void {
    const id = MESSAGE_SPECS[kind].id;
    this.network.onSend(peer, (to, bytes) => {
      if (bytes[HEADER_OFFSETS.kind] !== id || this.forged.has(bytes) || !this.isActive()) return 'deliver';
      const decoded = this.codec.decode(bytes);
      if (!decoded.ok || decoded.message.kind !== kind) return 'deliver';
      let out: Rewritten;
      try {
        out = change(to, decoded.message as unknown as MessageOf<K>);
      } catch (error) {
        if (this.failures.length < 4) this.failures.push(`rewriting ${kind}: ${(error as Error).message}`);
        return 'deliver';
      }
      if (out === null) return 'deliver';
      if (out === 'drop') return 'drop';
      // The forged copy leaves a microtask later, after the original's place in the uplink.
      queueMicrotask(() => this.forge(peer, to, out));
      return 'drop';
    });
  }
}

/** A payload's values (the round's codec, shard k's length), changed by `change`, encoded again. */
export function transformPayload(
  context: AttackContext,
  message: { fragment: number; round: number; shard: number; codec: string; payload: Uint8Array },
  change: (values: Float32Array) => Float32Array,
): Uint8Array | null {
  const open = context.roundOpen(message.fragment, message.round);
  const range = open?.shards[message.shard];
  if (!open || !range || message.payload.byteLength === 0) return null;
  const codec = createCodec(message.codec, { blockSize: open.blockSize });
  return codec.encode(change(codec.decode(message.payload, range.end - range.start)));
}

/** Every peer `hostile` has a channel to: the host and the other workers. */
export function everyoneBut(hostile: HostilePeer): PeerId[] {
  return hostile.member.transport.peers();
}

/**
 * Answers every state request the hostile peer gets with a made-up state, θ = m = 0 for the
 * fragment, under its true hash (so a hash check of the transfer alone passes), at the round
 * `claimedRound(p)` says; its own replica's honest answers are dropped. Returns the made-up
 * state's hash per fragment, for the attack's forged commit or hash report.
 */
export function servePoisonedState(
  context: AttackContext,
  hostile: HostilePeer,
  claimedRound: (fragment: number) => number,
): string[] {
  const poisonHashes = context.fragments.map((f) =>
    context.hasher.hash(new Float32Array(f.size), new Float32Array(f.size)),
  );
  context.rewrite(hostile.peer, 'state-transfer', () => 'drop');
  hostile.member.on('state-request', (from, request) => {
    if (!context.isActive()) return;
    const fragment = context.fragments[request.fragment];
    if (!fragment || request.end > fragment.size) return;
    context.forge(hostile.peer, from, {
      kind: 'state-transfer',
      fragment: request.fragment,
      round: Math.max(1, claimedRound(request.fragment)),
      start: request.start,
      end: request.end,
      fragmentSize: fragment.size,
      hash: poisonHashes[request.fragment] as string,
      roomTokens: 0,
      payload: new Uint8Array(8 * (request.end - request.start)), // θ then m, fp32 zeros
    });
  });
  return poisonHashes;
}

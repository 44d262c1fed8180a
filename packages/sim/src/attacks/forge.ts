/**
 * Forging on the wire, from outside the swarm: rewriting a hostile peer's outgoing messages
 * (decode, change, encode again) and sending messages it made up. Forged bytes are remembered so
 * that the hooks (the referee's, the attack's own) let them through untouched. A hostile peer
 * holds its own key pair, as any volunteer does: what it forges of the signed kinds it signs
 * (with its own id, so the lie is attributable, never with another's).
 */
import { createCodec } from '@shoal/diloco';
import {
  HEADER_OFFSETS,
  type Identity,
  isSignedMessage,
  MESSAGE_SPECS,
  type Message,
  type MessageKind,
  type MessageOf,
  type PeerId,
  signedBytesOf,
  type WireCodec,
} from '@shoal/protocol';
import type { SimNetwork } from '../index.ts';
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
    /** Each peer's key pair (none: the room does not sign). */
    private readonly identities: ReadonlyMap<PeerId, Identity>,
    /** Real work inside virtual time (WebCrypto): the clock's `track`, so runs stay deterministic. */
    private readonly track: <T>(work: PromiseLike<T>) => Promise<T>,
  ) {}

  /** Sends `message` from `from` to each of `to` as the attacker made it (signed once, if it signs). */
  forge(from: PeerId, to: PeerId | readonly PeerId[], message: Message): void {
    const receivers = typeof to === 'string' ? [to] : to;
    const identity = this.identities.get(from);
    if (!identity || !isSignedMessage(message)) {
      this.send(from, receivers, message);
      return;
    }
    const { signature: _stale, ...claim } = message as typeof message & { signature?: string };
    const signing = signedBytesOf(this.runId, from, claim as typeof message).then((bytes) => identity.sign(bytes));
    this.track(signing).then(
      (signature) => this.send(from, receivers, { ...claim, signature } as Message),
      (error: unknown) => this.fail(`signing ${message.kind}: ${String(error)}`),
    );
  }

  private send(from: PeerId, receivers: readonly PeerId[], message: Message): void {
    const transport = this.network.transport(from);
    if (!transport) return; // a peer that is down just loses it
    let bytes: Uint8Array;
    try {
      bytes = this.codec.encode(message, this.runId);
    } catch (error) {
      this.fail(`${message.kind}: ${(error as Error).message}`);
      return;
    }
    this.forged.add(bytes);
    for (const to of receivers) transport.send(to, bytes).catch(() => {});
  }

  private fail(reason: string): void {
    if (this.failures.length < 4) this.failures.push(reason);
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
        this.fail(`rewriting ${kind}: ${(error as Error).message}`);
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

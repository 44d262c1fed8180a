/**
 * The signaling server's part in a simulated room: every member gets a key pair of its own, bound
 * to its peer id in one registry that every member reads, so that a simulated room signs and
 * verifies what a real room does (MemberOptions.requireSignatures is on). Key pairs are made ahead,
 * since WebCrypto is asynchronous and members are made synchronously (a late joiner too). The
 * members, all in one process, hash each signed payload and check each signature once between them
 * (sim/shared-crypto.ts).
 */
import { createIdentity, type Identity, type KeyAlgorithm, type PeerId } from '@shoal/protocol';
import type { MemberOptions } from '@shoal/swarm';
import { SharedDigests, SharedKeyRegistry } from './shared-crypto.ts';

export class SimKeys {
  /** What the server bound: peer id → key. */
  readonly peerKeys = new SharedKeyRegistry();
  readonly digests = new SharedDigests();
  /** Each member's key pair (an attacker signs with its own). */
  readonly identities = new Map<PeerId, Identity>();

  private constructor(private readonly pool: Identity[]) {}

  /** `count` key pairs made ahead (Ed25519 where WebCrypto has it, or `algorithm`). */
  static async create(count: number, algorithm?: KeyAlgorithm): Promise<SimKeys> {
    return new SimKeys(await Promise.all(Array.from({ length: count }, () => createIdentity({ algorithm }))));
  }

  /** `peer`'s Member options: a key pair of its own, bound to it. Throws once the pool is spent. */
  memberOptions(peer: PeerId): MemberOptions {
    let identity = this.identities.get(peer);
    if (!identity) {
      identity = this.pool.shift();
      if (!identity) throw new Error(`no key pair left for ${peer}: make more with SimKeys.create`);
      this.identities.set(peer, identity);
      this.peerKeys.bind(peer, identity.key);
    }
    return { identity, peerKeys: this.peerKeys, payloadDigest: this.digests.digest };
  }
}

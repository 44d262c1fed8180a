/**
 * What the members of a simulated room hash and verify once between them. Every signed message
 * (a contribution, a shard result, a hash report) is hashed by its sender to sign it and by each
 * recipient to check it: a shard result of `small` is hashed by five members, each SHA-256 of
 * ~0.7 MB, and each recipient verifies the same signature over the same bytes.
 *
 * Exact, not "probably the same": a payload's digest is found only for byte-equal bytes (memcmp;
 * a sampled fingerprint only picks which to compare), a verdict only for the same key, the same
 * signed bytes and the same signature. SHA-256 and Ed25519 verification are deterministic, so each
 * member gets the answer it would have computed; a forger's bytes or signature are never
 * another's. Failures (a rejected digest) are not kept: the next caller computes again. Payloads
 * are kept by reference: nothing writes to a message's bytes once sent (the contract the simulated
 * network's delivery of one buffer to every recipient rests on).
 */
import { type PeerKey, PeerKeyRegistry, type SignatureCheck, sha256Hex } from '@shoal/protocol';
import { sameBytes } from './same-bytes.ts';

/** Payloads (and verdicts) remembered: the messages of a round in flight, the oldest let go first. */
const KEPT = 64;
/** At most this many bytes of payloads kept (a round of fp32 messages of a large model is more). */
const KEPT_BYTES = 64 * 2 ** 20;
/** Bytes sampled for a payload's fingerprint. */
const SAMPLES = 32;

function fingerprint(bytes: Uint8Array): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < SAMPLES && bytes.length > 0; i++) {
    hash = Math.imul(hash ^ (bytes[Math.floor((i * (bytes.length - 1)) / (SAMPLES - 1))] as number), 0x01000193);
  }
  return `${bytes.length}:${(hash >>> 0).toString(16)}`;
}

interface Kept {
  print: string;
  bytes: Uint8Array;
  digest: Promise<string>;
}

/** SHA-256 of payloads (sha256Hex's answer), once per distinct bytes among those kept. */
export class SharedDigests {
  private readonly kept: Kept[] = [];
  private keptBytes = 0;
  /** Digests found computed already. */
  hits = 0;

  readonly digest = (bytes: Uint8Array<ArrayBuffer>): Promise<string> => {
    const print = fingerprint(bytes);
    const found = this.kept.find((k) => k.print === print && sameBytes(k.bytes, bytes));
    if (found) {
      this.hits++;
      return found.digest;
    }
    const entry = { print, bytes, digest: sha256Hex(bytes) };
    entry.digest.catch(() => this.forget(entry));
    this.kept.push(entry);
    this.keptBytes += bytes.byteLength;
    while (this.kept.length > KEPT || (this.keptBytes > KEPT_BYTES && this.kept.length > 1))
      this.forget(this.kept[0] as Kept);
    return entry.digest;
  };

  private forget(entry: Kept): void {
    const at = this.kept.indexOf(entry);
    if (at < 0) return;
    this.kept.splice(at, 1);
    this.keptBytes -= entry.bytes.byteLength;
  }
}

/** A room's key registry whose signature checks are made once per (key, signed bytes, signature). */
export class SharedKeyRegistry extends PeerKeyRegistry {
  private readonly verdicts = new Map<string, Promise<SignatureCheck>>();
  /** Verdicts found made already. */
  hits = 0;

  override check(key: PeerKey, bytes: Uint8Array<ArrayBuffer>, signature: string | undefined): Promise<SignatureCheck> {
    if (signature === undefined) return super.check(key, bytes, signature);
    // the signed bytes are short (the claims and the payload's digest): kept whole, a char a byte
    let signed = '';
    for (const byte of bytes) signed += String.fromCharCode(byte);
    const id = JSON.stringify([key.algorithm, key.publicKey, signature, signed]);
    const found = this.verdicts.get(id);
    if (found) {
      this.hits++;
      return found;
    }
    const verdict = super.check(key, bytes, signature);
    this.verdicts.set(id, verdict);
    if (this.verdicts.size > KEPT) this.verdicts.delete(this.verdicts.keys().next().value as string);
    return verdict;
  }
}

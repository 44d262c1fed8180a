/**
 * Who said it: every peer has a key pair made with WebCrypto (Ed25519 where the runtime has it,
 * else ECDSA P-256 with SHA-256; Node 20 and browsers run the same code), announced to the
 * signaling server, which binds it to the peer id it hands out, and in the swarm `hello`.
 * Contributions, shard results and hash reports carry a signature over `signedBytes`: the run,
 * the signer's peer id, the kind, fragment, round, shard, codec, weight, the payload's SHA-256,
 * and what the kind claims besides (a result's hash and verdicts, a reported hash). A receiver
 * that knows the sender's key refuses a message that does not verify (swarm Member).
 *
 * Why the signer's id is signed: the server binds ids, not keys, so a peer may announce someone
 * else's public key; with the id inside the signed bytes that only makes its own messages fail.
 * Why the payload's SHA-256 and not the wire's XXH3: a signature needs a hash nobody can collide.
 *
 * Keys travel as base64url of their raw form: 32 bytes for Ed25519, the 65-byte uncompressed
 * point (0x04 ‖ X ‖ Y) for P-256. Both algorithms sign to 64 bytes (Ed25519's R ‖ S; WebCrypto's
 * ECDSA gives r ‖ s), 86 base64url characters. The private key is made non-extractable: it never
 * leaves WebCrypto, yet a CryptoKey can be posted to a Web Worker (structured clone).
 */
import { createSHA256, type IHasher } from 'hash-wasm';
import { z } from 'zod';
import type { Message, MessageKind } from './messages.ts';
import type { PeerId } from './transport.ts';

export const KEY_ALGORITHMS = ['Ed25519', 'ECDSA-P256'] as const;
export type KeyAlgorithm = (typeof KEY_ALGORITHMS)[number];

/** Raw public key bytes per algorithm. */
const PUBLIC_KEY_BYTES: Record<KeyAlgorithm, number> = { Ed25519: 32, 'ECDSA-P256': 65 };
/** What both algorithms sign to. */
export const SIGNATURE_BYTES = 64;

/** Bytes that an unpadded base64url string of `length` characters decodes to; -1 for an impossible length. */
export function base64urlByteLength(length: number): number {
  return length % 4 === 1 ? -1 : Math.floor((length * 3) / 4);
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** A public key as announced: its algorithm and its raw bytes in base64url. */
export const peerKeySchema = z
  .object({
    algorithm: z.enum(KEY_ALGORITHMS),
    // 88 characters hold 66 bytes, above the longest key (P-256's 65)
    publicKey: z.string().min(1).max(88).regex(BASE64URL, 'a public key is base64url'),
  })
  .refine((key) => base64urlByteLength(key.publicKey.length) === PUBLIC_KEY_BYTES[key.algorithm], {
    message: 'the public key has the wrong length for its algorithm',
    path: ['publicKey'],
  });
export type PeerKey = z.infer<typeof peerKeySchema>;

/**
 * A signature in base64url. Both algorithms give 64 bytes (86 characters); the schema admits 32 to
 * 128 bytes so that a later minor version may add an algorithm, and verification checks the rest.
 */
export const signatureSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{43,171}$/, 'a signature is 32 to 128 bytes of base64url');

export function toBase64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The bytes of unpadded base64url `text`; throws on anything else. */
export function fromBase64url(text: string): Uint8Array<ArrayBuffer> {
  if (!BASE64URL.test(text) || base64urlByteLength(text.length) < 0) throw new Error('not base64url');
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const subtle = (): SubtleCrypto => {
  const crypto = globalThis.crypto;
  if (!crypto?.subtle) throw new Error('WebCrypto (crypto.subtle) is not available here: a secure context is needed');
  return crypto.subtle;
};

const KEY_PARAMS: Record<KeyAlgorithm, AlgorithmIdentifier | EcKeyImportParams> = {
  Ed25519: { name: 'Ed25519' },
  'ECDSA-P256': { name: 'ECDSA', namedCurve: 'P-256' },
};
const SIGN_PARAMS: Record<KeyAlgorithm, AlgorithmIdentifier | EcdsaParams> = {
  Ed25519: { name: 'Ed25519' },
  'ECDSA-P256': { name: 'ECDSA', hash: 'SHA-256' },
};

let ed25519Probe: Promise<boolean> | undefined;

/** Whether this runtime's WebCrypto makes Ed25519 keys (asked once: Chrome before 137 does not). */
export function supportsEd25519(): Promise<boolean> {
  ed25519Probe ??= subtle()
    .generateKey(KEY_PARAMS.Ed25519, false, ['sign', 'verify'])
    .then(
      () => true,
      () => false,
    );
  return ed25519Probe;
}

/** This peer's key pair: what it announces, and how it signs. */
export interface Identity {
  readonly key: PeerKey;
  /** Not extractable; can be posted to a Web Worker and made an Identity there (identityFromKeys). */
  readonly privateKey: CryptoKey;
  /** The signature of `bytes`, base64url. */
  sign(bytes: Uint8Array<ArrayBuffer>): Promise<string>;
}

/** The identity for `key` and its private half (a key pair made elsewhere, posted here). */
export function identityFromKeys(key: PeerKey, privateKey: CryptoKey): Identity {
  const params = SIGN_PARAMS[key.algorithm];
  return {
    key,
    privateKey,
    sign: async (bytes) => toBase64url(new Uint8Array(await subtle().sign(params, privateKey, bytes))),
  };
}

/** A fresh key pair: Ed25519 where WebCrypto has it, else ECDSA P-256 (or the algorithm asked for). */
export async function createIdentity(options: { algorithm?: KeyAlgorithm } = {}): Promise<Identity> {
  const algorithm = options.algorithm ?? ((await supportsEd25519()) ? 'Ed25519' : 'ECDSA-P256');
  const pair = (await subtle().generateKey(KEY_PARAMS[algorithm], false, ['sign', 'verify'])) as CryptoKeyPair;
  const raw = new Uint8Array(await subtle().exportKey('raw', pair.publicKey));
  return identityFromKeys({ algorithm, publicKey: toBase64url(raw) }, pair.privateKey);
}

/** A peer's public key for WebCrypto; rejects a key this runtime cannot use (malformed, or an algorithm it lacks). */
export async function importPeerKey(key: PeerKey): Promise<CryptoKey> {
  return subtle().importKey('raw', fromBase64url(key.publicKey), KEY_PARAMS[key.algorithm], false, ['verify']);
}

/** Whether `signature` (base64url) is `key`'s over `bytes`. Never throws: anything malformed is false. */
export async function verifySignature(
  key: PeerKey | { key: PeerKey; imported: CryptoKey },
  bytes: Uint8Array<ArrayBuffer>,
  signature: string,
): Promise<boolean> {
  try {
    const decoded = fromBase64url(signature);
    if (decoded.length !== SIGNATURE_BYTES) return false;
    const [peerKey, imported] = 'imported' in key ? [key.key, key.imported] : [key, await importPeerKey(key)];
    return await subtle().verify(SIGN_PARAMS[peerKey.algorithm], imported, decoded, bytes);
  } catch {
    return false;
  }
}

/** The kinds that carry a signature: what a peer claims to have computed. */
export const SIGNED_KINDS = ['contribution', 'shard-result', 'hash-report'] as const satisfies readonly MessageKind[];
export type SignedKind = (typeof SIGNED_KINDS)[number];
export type SignedMessage = Extract<Message, { kind: SignedKind }>;

export function isSignedKind(kind: MessageKind): kind is SignedKind {
  return (SIGNED_KINDS as readonly MessageKind[]).includes(kind);
}

export function isSignedMessage(message: Message): message is SignedMessage {
  return isSignedKind(message.kind);
}

/** Names the format of the signed bytes, so a signature cannot be taken for one over anything else. */
export const SIGNING_CONTEXT = 'shoal-signed/1';

/**
 * Payloads up to this many bytes are hashed on the calling thread (hash-wasm's SHA-256, about
 * 250 MB/s: at most 1 ms), larger ones by WebCrypto off the thread (about 700 MB/s here). Each
 * WebCrypto call costs a trip through the event loop, which a member busy training (a CPU step)
 * holds for a whole step: a small message is signed or verified in one trip instead of two.
 */
export const SYNC_HASH_MAX_BYTES = 256 * 1024;

let syncSha256: Promise<IHasher> | undefined;

/** SHA-256 of `bytes`, lowercase hex. */
export async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  if (bytes.length <= SYNC_HASH_MAX_BYTES) {
    // one hasher, reused: init … digest runs synchronously, so calls cannot interleave
    syncSha256 ??= createSHA256();
    const hasher = await syncSha256;
    hasher.init();
    hasher.update(bytes);
    return hasher.digest('hex');
  }
  const digest = new Uint8Array(await subtle().digest('SHA-256', bytes));
  let hex = '';
  for (const byte of digest) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

export interface SignedClaim {
  /** The run id of the message's header. */
  runId: number;
  /** The peer id the signer was given by the signaling server. */
  signer: PeerId;
  message: SignedMessage;
  /** sha256Hex of the payload; null for a kind without one (hash-report). */
  payloadHash: string | null;
}

/**
 * The canonical bytes a signature covers: UTF-8 of a JSON array in a fixed order, so that signer
 * and verifier build the same bytes from the message whatever order its object keys are in. A
 * verdict's `message` (free text, not a claim) and the signature itself are left out.
 */
export function signedBytes(claim: SignedClaim): Uint8Array<ArrayBuffer> {
  const { message } = claim;
  const common = [
    SIGNING_CONTEXT,
    claim.runId,
    claim.signer,
    message.kind,
    message.fragment,
    message.round,
    'shard' in message ? message.shard : null,
    'codec' in message ? message.codec : null,
    'weight' in message ? message.weight : null,
    claim.payloadHash,
  ];
  let claims: unknown[];
  switch (message.kind) {
    case 'contribution':
      claims = [];
      break;
    case 'shard-result':
      claims = [
        message.resultHash ?? null,
        message.check ?? false,
        message.verdicts.map((verdict) => [verdict.peer, verdict.weight, verdict.reason]),
      ];
      break;
    case 'hash-report':
      claims = [message.hash];
      break;
  }
  return new TextEncoder().encode(JSON.stringify([...common, ...claims]));
}

/**
 * signedBytes of `message` as `signer` sends (or sent) it in run `runId`, its payload hashed with
 * `digest` (sha256Hex, or one that gives sha256Hex's answer: the simulator's members share theirs).
 */
export async function signedBytesOf(
  runId: number,
  signer: PeerId,
  message: SignedMessage,
  digest: (bytes: Uint8Array<ArrayBuffer>) => Promise<string> = sha256Hex,
): Promise<Uint8Array<ArrayBuffer>> {
  const payloadHash = 'payload' in message ? await digest(message.payload as Uint8Array<ArrayBuffer>) : null;
  return signedBytes({ runId, signer, message, payloadHash });
}

/**
 * What the receiver of a signed message concluded. 'unverifiable': the sender's key is well formed
 * but this runtime's WebCrypto lacks its algorithm (Ed25519 before Chrome 137), so this receiver
 * can judge the message no better than one from a peer without a key.
 */
export type SignatureCheck =
  | { verdict: 'valid' }
  | { verdict: 'invalid'; detail: string }
  | { verdict: 'unverifiable'; detail: string };

/**
 * A transport whose peers a signaling server named (the room mesh) may lend its member the
 * identity its signaling client announced and the keys the server bound; a swarm Member takes
 * them unless it is given its own.
 */
export interface KeyedTransport {
  readonly identity?: Identity | null;
  readonly peerKeys?: PeerKeyRegistry;
}

/**
 * The public keys of the room's peers, as the signaling server bound them (peer id → key, or null
 * for a peer that announced none: an older client). Who fills it: the signaling client, from
 * joined / reclaimed / peer-joined / peer-left; a swarm Member reads it, and adds the key of a
 * peer that the server said nothing about (an older server) from that peer's hello.
 */
export class PeerKeyRegistry {
  private readonly bound = new Map<PeerId, PeerKey | null>();
  private readonly listeners = new Set<(peer: PeerId, key: PeerKey | null | undefined) => void>();
  /** Imported once per announced key object (a re-bound key is a new object). */
  private readonly imported = new WeakMap<PeerKey, Promise<CryptoKey>>();

  /** Sets `peer`'s key; null: the peer announced none. */
  bind(peer: PeerId, key: PeerKey | null): void {
    this.bound.set(peer, key);
    for (const listener of this.listeners) listener(peer, key);
  }

  /** Forgets `peer` (it left the room). */
  unbind(peer: PeerId): void {
    if (!this.bound.delete(peer)) return;
    for (const listener of this.listeners) listener(peer, undefined);
  }

  /** `peer`'s key; null when it announced none; undefined when nothing is known of it. */
  get(peer: PeerId): PeerKey | null | undefined {
    return this.bound.get(peer);
  }

  entries(): [PeerId, PeerKey | null][] {
    return [...this.bound];
  }

  get size(): number {
    return this.bound.size;
  }

  /** Calls `listener` on every bind and unbind (key undefined); returns a function that stops it. */
  onChange(listener: (peer: PeerId, key: PeerKey | null | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Whether `signature` over `bytes` is `key`'s (a key captured from this registry). */
  async check(key: PeerKey, bytes: Uint8Array<ArrayBuffer>, signature: string | undefined): Promise<SignatureCheck> {
    if (signature === undefined) return { verdict: 'invalid', detail: 'unsigned, and its sender has a key' };
    let imported = this.imported.get(key);
    if (!imported) {
      imported = importPeerKey(key);
      this.imported.set(key, imported);
    }
    let cryptoKey: CryptoKey;
    try {
      cryptoKey = await imported;
    } catch (error) {
      const detail = `its ${key.algorithm} key cannot be used here: ${(error as Error).message}`;
      return { verdict: (error as Error)?.name === 'NotSupportedError' ? 'unverifiable' : 'invalid', detail };
    }
    return (await verifySignature({ key, imported: cryptoKey }, bytes, signature))
      ? { verdict: 'valid' }
      : { verdict: 'invalid', detail: `the signature does not verify with its ${key.algorithm} key` };
  }
}

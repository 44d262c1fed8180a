import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  base64urlByteLength,
  createIdentity,
  fromBase64url,
  KEY_ALGORITHMS,
  PeerKeyRegistry,
  peerKeySchema,
  type SignedMessage,
  SYNC_HASH_MAX_BYTES,
  sha256Hex,
  signatureSchema,
  signedBytes,
  signedBytesOf,
  toBase64url,
  verifySignature,
} from './identity.ts';
import { SAMPLES } from './test-fixtures.ts';
import { createWireCodec } from './wire.ts';

const RUN = 0xdead_beef;
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

afterEach(() => {
  vi.restoreAllMocks();
  vi.resetModules();
});

describe.each(KEY_ALGORITHMS)('an %s identity', (algorithm) => {
  it('announces a raw public key of the right length, signs to 64 bytes, and verifies only what it signed', async () => {
    const identity = await createIdentity({ algorithm });
    expect(identity.key.algorithm).toBe(algorithm);
    expect(peerKeySchema.parse(identity.key)).toEqual(identity.key);
    expect(fromBase64url(identity.key.publicKey)).toHaveLength(algorithm === 'Ed25519' ? 32 : 65);
    expect(identity.privateKey.extractable).toBe(false);

    const bytes = await signedBytesOf(RUN, 'peer-a', SAMPLES.contribution);
    const signature = await identity.sign(bytes);
    expect(signatureSchema.parse(signature)).toHaveLength(86);
    expect(await verifySignature(identity.key, bytes, signature)).toBe(true);

    const other = await signedBytesOf(RUN, 'peer-b', SAMPLES.contribution);
    expect(await verifySignature(identity.key, other, signature)).toBe(false);
    const stranger = await createIdentity({ algorithm });
    expect(await verifySignature(stranger.key, bytes, signature)).toBe(false);
    expect(await verifySignature(identity.key, bytes, signature.slice(0, -2))).toBe(false);
    expect(await verifySignature(identity.key, bytes, `${signature.slice(0, -1)}!`)).toBe(false);
  });
});

describe('createIdentity', () => {
  it('makes Ed25519 keys where WebCrypto has them (Node 20), else ECDSA P-256, asking once', async () => {
    expect((await createIdentity()).key.algorithm).toBe('Ed25519');

    vi.resetModules();
    const fresh = await import('./identity.ts');
    const generateKey = crypto.subtle.generateKey.bind(crypto.subtle);
    const spy = vi
      .spyOn(crypto.subtle, 'generateKey')
      .mockImplementation((...args: Parameters<SubtleCrypto['generateKey']>) =>
        (args[0] as { name?: string }).name === 'Ed25519'
          ? Promise.reject(new DOMException('Unrecognized name', 'NotSupportedError'))
          : (generateKey(...args) as never),
      );
    const [first, second] = [await fresh.createIdentity(), await fresh.createIdentity()];
    expect([first.key.algorithm, second.key.algorithm]).toEqual(['ECDSA-P256', 'ECDSA-P256']);
    const asked = spy.mock.calls.filter((call) => (call[0] as { name?: string }).name === 'Ed25519');
    expect(asked).toHaveLength(1);
  });
});

describe('signedBytes', () => {
  const base = { runId: RUN, signer: 'peer-a', payloadHash: 'ab'.repeat(32) };
  const of = (message: SignedMessage, change: Partial<typeof base> = {}) =>
    text(signedBytes({ ...base, ...change, message }));

  it('names the run, the signer, the kind, every header field and the payload hash, in a fixed order', () => {
    expect(of(SAMPLES.contribution)).toBe(
      `["shoal-signed/1",${RUN},"peer-a","contribution",1,4,2,"fp4",40960,"${'ab'.repeat(32)}"]`,
    );
    expect(of(SAMPLES['hash-report'], { payloadHash: null as never })).toBe(
      `["shoal-signed/1",${RUN},"peer-a","hash-report",1,4,null,null,null,null,"${SAMPLES['hash-report'].hash}"]`,
    );
  });

  it('changes with every claim a message makes, and not with what it does not claim', () => {
    const contribution = SAMPLES.contribution;
    const result = { ...SAMPLES['shard-result'], resultHash: 'cd'.repeat(16) };
    const variants = [
      of(contribution),
      of(contribution, { runId: RUN - 1 }),
      of(contribution, { signer: 'peer-b' }),
      of(contribution, { payloadHash: 'ac'.repeat(32) }),
      of({ ...contribution, fragment: 0 }),
      of({ ...contribution, round: 5 }),
      of({ ...contribution, shard: 1 }),
      of({ ...contribution, codec: 'int8' }),
      of({ ...contribution, weight: 40_961 }),
      of(result),
      of({ ...result, resultHash: 'ce'.repeat(16) }),
      of({ ...result, check: true }),
      of({ ...result, verdicts: result.verdicts.map((v, i) => (i === 0 ? { ...v, weight: v.weight * 2 } : v)) }),
      of({ ...result, verdicts: result.verdicts.map((v, i) => (i === 1 ? { ...v, reason: 'norm' } : v)) }),
      of(SAMPLES['hash-report']),
      of({ ...SAMPLES['hash-report'], hash: 'ef'.repeat(16) }),
    ];
    expect(new Set(variants).size).toBe(variants.length);
    // a verdict's sentence and the signature are no claims; key order is no claim either
    const reordered = Object.fromEntries(Object.entries(result).reverse()) as typeof result;
    const sentences = { ...result, verdicts: result.verdicts.map((v) => ({ ...v, message: 'other words' })) };
    expect(of(reordered)).toBe(of(result));
    expect(of(sentences)).toBe(of(result));
    expect(of({ ...result, signature: 'x'.repeat(86) })).toBe(of(result));
  });

  it('hashes the payload with SHA-256, on the thread up to SYNC_HASH_MAX_BYTES and by WebCrypto above', async () => {
    const webCryptoHex = async (bytes: Uint8Array<ArrayBuffer>) =>
      [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))]
        .map((b) => b.toString(16).padStart(2, '0'))
        .join('');
    const bytes = await signedBytesOf(RUN, 'peer-a', SAMPLES.contribution);
    expect(text(bytes)).toContain(`"${await webCryptoHex(SAMPLES.contribution.payload as Uint8Array<ArrayBuffer>)}"`);
    const digest = vi.spyOn(crypto.subtle, 'digest');
    for (const length of [0, SYNC_HASH_MAX_BYTES, SYNC_HASH_MAX_BYTES + 1]) {
      const payload = Uint8Array.from({ length }, (_, i) => (i * 131) & 0xff);
      expect(await sha256Hex(payload)).toBe(await webCryptoHex(payload));
    }
    // the test's own three digests, and sha256Hex's one above the threshold
    expect(digest).toHaveBeenCalledTimes(4);
  });
});

describe('keys and signatures on the wire', () => {
  it('accept only base64url of the length the algorithm has', () => {
    const ed = { algorithm: 'Ed25519', publicKey: toBase64url(new Uint8Array(32)) } as const;
    const p256 = { algorithm: 'ECDSA-P256', publicKey: toBase64url(new Uint8Array(65)) } as const;
    expect(peerKeySchema.safeParse(ed).success).toBe(true);
    expect(peerKeySchema.safeParse(p256).success).toBe(true);
    expect(peerKeySchema.safeParse({ ...ed, algorithm: 'ECDSA-P256' }).success).toBe(false);
    expect(peerKeySchema.safeParse({ ...ed, publicKey: toBase64url(new Uint8Array(33)) }).success).toBe(false);
    expect(peerKeySchema.safeParse({ ...ed, publicKey: `${ed.publicKey.slice(1)}+` }).success).toBe(false);
    expect(peerKeySchema.safeParse({ ...ed, algorithm: 'RSA' }).success).toBe(false);
    expect(signatureSchema.safeParse('A'.repeat(86)).success).toBe(true);
    expect(signatureSchema.safeParse('A'.repeat(172)).success).toBe(false); // over 128 bytes
    expect(signatureSchema.safeParse('A'.repeat(42)).success).toBe(false);
    expect(base64urlByteLength(86)).toBe(64);
    expect(base64urlByteLength(87)).toBe(65);
    expect(base64urlByteLength(85)).toBe(-1);
  });

  it('travel in the JSON part: a signed contribution, shard result, hash report and a hello with its key decode as sent', async () => {
    const codec = await createWireCodec();
    const identity = await createIdentity();
    const signature = await identity.sign(await signedBytesOf(RUN, 'peer-a', SAMPLES.contribution));
    for (const message of [
      { ...SAMPLES.contribution, signature },
      { ...SAMPLES['shard-result'], signature },
      { ...SAMPLES['hash-report'], signature },
      { ...SAMPLES.hello, key: identity.key },
    ]) {
      const decoded = codec.decode(codec.encode(message, RUN));
      expect(decoded).toMatchObject({ ok: true, message });
    }
    // a signature costs its JSON text: `,"signature":` (13 bytes) and 86 base64url characters in quotes
    const plain = codec.encode(SAMPLES['hash-report'], RUN).length;
    expect(codec.encode({ ...SAMPLES['hash-report'], signature }, RUN).length - plain).toBe(101);
    // one byte less in a contribution, whose body has nothing else (no comma)
    const bare = codec.encode(SAMPLES.contribution, RUN).length;
    expect(codec.encode({ ...SAMPLES.contribution, signature }, RUN).length - bare).toBe(100);
    expect(() => codec.encode({ ...SAMPLES['hash-report'], signature: `${signature}=` }, RUN)).toThrow(/signature/);
  });
});

describe('PeerKeyRegistry', () => {
  it('checks a signature against a bound key, imports each key once, and tells on binds and unbinds', async () => {
    const registry = new PeerKeyRegistry();
    const changes: string[] = [];
    registry.onChange((peer, key) =>
      changes.push(`${peer}:${key === undefined ? 'gone' : (key?.algorithm ?? 'none')}`),
    );
    const identity = await createIdentity({ algorithm: 'ECDSA-P256' });
    registry.bind('peer-a', identity.key);
    registry.bind('peer-b', null);
    registry.unbind('peer-b');
    expect(changes).toEqual(['peer-a:ECDSA-P256', 'peer-b:none', 'peer-b:gone']);
    expect(registry.entries()).toEqual([['peer-a', identity.key]]);

    const importKey = vi.spyOn(crypto.subtle, 'importKey');
    const bytes = await signedBytesOf(RUN, 'peer-a', SAMPLES['hash-report']);
    const signature = await identity.sign(bytes);
    expect(await registry.check(identity.key, bytes, signature)).toEqual({ verdict: 'valid' });
    expect(await registry.check(identity.key, bytes, undefined)).toEqual({
      verdict: 'invalid',
      detail: 'unsigned, and its sender has a key',
    });
    const tampered = await signedBytesOf(RUN, 'peer-a', { ...SAMPLES['hash-report'], hash: 'ef'.repeat(16) });
    expect(await registry.check(identity.key, tampered, signature)).toMatchObject({ verdict: 'invalid' });
    expect(importKey).toHaveBeenCalledTimes(1);
  });

  it('calls a key this WebCrypto lacks the algorithm of unverifiable, and a malformed one invalid', async () => {
    const registry = new PeerKeyRegistry();
    const identity = await createIdentity({ algorithm: 'Ed25519' });
    const bytes = await signedBytesOf(RUN, 'peer-a', SAMPLES['hash-report']);
    const signature = await identity.sign(bytes);
    const importKey = crypto.subtle.importKey.bind(crypto.subtle);
    vi.spyOn(crypto.subtle, 'importKey').mockImplementation((...args: Parameters<SubtleCrypto['importKey']>) =>
      (args[2] as { name?: string }).name === 'Ed25519'
        ? Promise.reject(new DOMException('Unrecognized name', 'NotSupportedError'))
        : (importKey(...args) as never),
    );
    expect(await registry.check(identity.key, bytes, signature)).toMatchObject({ verdict: 'unverifiable' });
    // a P-256 "key" that is no point on the curve (65 bytes of 0x04 0 0 …)
    const notAPoint = {
      algorithm: 'ECDSA-P256',
      publicKey: toBase64url(Uint8Array.of(4, ...new Uint8Array(64))),
    } as const;
    expect(await registry.check(notAPoint, bytes, signature)).toMatchObject({ verdict: 'invalid' });
  });
});

import { createIdentity, SYNC_HASH_MAX_BYTES, sha256Hex } from '@shoal/protocol';
import { describe, expect, it } from 'vitest';
import { SharedDigests, SharedKeyRegistry } from './shared-crypto.ts';

describe('what a simulated room hashes and verifies once', () => {
  it('gives a payload the digest sha256Hex gives it, found again only for the same bytes', async () => {
    const digests = new SharedDigests();
    const payload = Uint8Array.from({ length: SYNC_HASH_MAX_BYTES + 5 }, (_, i) => (i * 31) & 255);
    const expected = await sha256Hex(payload);
    expect(await digests.digest(payload)).toBe(expected);
    expect(await digests.digest(payload.slice())).toBe(expected); // another buffer, the same bytes
    expect(digests.hits).toBe(1);
    const other = payload.slice();
    other[SYNC_HASH_MAX_BYTES] = (other[SYNC_HASH_MAX_BYTES] as number) ^ 1; // a byte the fingerprint skips
    expect(await digests.digest(other)).toBe(await sha256Hex(other));
    expect(digests.hits).toBe(1);
  });

  it("judges a signature once per key, signed bytes and signature, and a forger's never as another's", async () => {
    const registry = new SharedKeyRegistry();
    const [alice, mallory] = await Promise.all([createIdentity(), createIdentity()]);
    const claim = new TextEncoder().encode('["shoal-signed/1",1,"w0","contribution"]');
    const signature = await alice.sign(claim);
    expect(await registry.check(alice.key, claim, signature)).toEqual({ verdict: 'valid' });
    expect(await registry.check(alice.key, claim.slice(), signature)).toEqual({ verdict: 'valid' });
    expect(registry.hits).toBe(1);
    // the same bytes and signature under another key, or another signature: judged anew, invalid
    expect((await registry.check(mallory.key, claim, signature)).verdict).toBe('invalid');
    expect((await registry.check(alice.key, claim, await mallory.sign(claim))).verdict).toBe('invalid');
    const changed = claim.slice();
    changed[3] = 0x41;
    expect((await registry.check(alice.key, changed, signature)).verdict).toBe('invalid');
    expect(registry.hits).toBe(1);
  });
});

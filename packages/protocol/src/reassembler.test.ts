import { describe, expect, it } from 'vitest';
import {
  CHUNK_HEADER_BYTES,
  chunkCount,
  chunkMessage,
  iterateChunks,
  readChunkHeader,
  writeChunkHeader,
} from './chunks.ts';
import { MAX_CHUNK_BYTES } from './limits.ts';
import { type PushResult, Reassembler, type ReassemblerOptions } from './reassembler.ts';
import { randomBytes, sameBytes, seededRandom } from './test-fixtures.ts';

function shuffled<T>(items: T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

function setup(options: Partial<ReassemblerOptions> = {}) {
  const clock = { now: 0 };
  const reassembler = new Reassembler({ now: () => clock.now, ...options });
  return { clock, reassembler };
}

function expectReason(result: PushResult, reason: string) {
  expect(result.status === 'rejected' && result.reason, JSON.stringify(result)).toBe(reason);
}

/** A chunk with a hand-set header and `dataLength` zero bytes. */
function rawChunk(messageId: number, index: number, count: number, totalBytes: number, dataLength: number) {
  const chunk = new Uint8Array(CHUNK_HEADER_BYTES + dataLength);
  writeChunkHeader(chunk, { messageId, index, count, totalBytes });
  return chunk;
}

describe('chunkMessage', () => {
  it('cuts messages into chunks within maxChunk and reassembles them, in order or not', () => {
    const random = seededRandom(11);
    const dataMax = 100 - CHUNK_HEADER_BYTES;
    for (const length of [0, 1, dataMax - 1, dataMax, dataMax + 1, 2 * dataMax, 12_345]) {
      const message = randomBytes(length, random);
      const chunks = chunkMessage(message, 100, 7);
      expect(chunks.length).toBe(chunkCount(length, 100));
      expect(chunks.length).toBe(Math.max(1, Math.ceil(length / dataMax)));
      for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(100);
      for (const order of [chunks, shuffled(chunks, random)]) {
        const { reassembler } = setup();
        const results = order.map((chunk) => reassembler.push(chunk));
        const last = results.pop();
        for (const r of results) expect(r.status).toBe('pending');
        expect(last?.status === 'complete' && sameBytes(last.bytes, message)).toBe(true);
        expect(reassembler.pendingMessages).toBe(0);
        expect(reassembler.pendingBytes).toBe(0);
      }
    }
  });

  it('handles a 3 MiB message at the 64 KiB maximum, interleaved with another', () => {
    const random = seededRandom(12);
    const big = randomBytes(3 * 1024 * 1024, random);
    const small = randomBytes(1000, random);
    const bigChunks = [...iterateChunks(big, MAX_CHUNK_BYTES, 0xffff_ffff)];
    const { reassembler } = setup();
    const done: PushResult[] = [];
    for (const [i, chunk] of bigChunks.entries()) {
      if (i === 10) done.push(reassembler.push(chunkMessage(small, 1200, 1)[0] as Uint8Array));
      done.push(reassembler.push(chunk));
    }
    const complete = done.filter((r) => r.status === 'complete');
    expect(complete.map((r) => r.messageId)).toEqual([1, 0xffff_ffff]);
    expect(sameBytes((complete[1] as { bytes: Uint8Array }).bytes, big)).toBe(true);
    expect(sameBytes((complete[0] as { bytes: Uint8Array }).bytes, small)).toBe(true);
  });

  it('refuses arguments a sender should never pass', () => {
    expect(() => chunkMessage(new Uint8Array(1), CHUNK_HEADER_BYTES, 0)).toThrow(RangeError);
    expect(() => chunkMessage(new Uint8Array(1), MAX_CHUNK_BYTES + 1, 0)).toThrow(RangeError);
    expect(() => chunkMessage(new Uint8Array(1), 100, -1)).toThrow(RangeError);
    expect(() => chunkMessage(new Uint8Array(1), 100, 2 ** 32)).toThrow(RangeError);
  });
});

describe('Reassembler rejects', () => {
  const message = randomBytes(1000, seededRandom(13));
  const chunks = chunkMessage(message, 220, 5); // 5 chunks of 200 bytes

  it('duplicates, and still completes the message', () => {
    const { reassembler } = setup();
    expect(reassembler.push(chunks[0] as Uint8Array).status).toBe('pending');
    expectReason(reassembler.push(chunks[0] as Uint8Array), 'duplicate');
    const results = chunks.slice(1).map((c) => reassembler.push(c));
    expect(results.at(-1)?.status).toBe('complete');
  });

  it('missing chunks: the message waits, is evicted after the timeout, and its late chunks are refused', () => {
    const { clock, reassembler } = setup({ timeoutMs: 1000 });
    for (const chunk of chunks.slice(0, 4)) {
      clock.now += 400;
      expect(reassembler.push(chunk).status).toBe('pending');
    }
    expect(reassembler.pendingBytes).toBeGreaterThan(1000);
    clock.now += 999;
    expect(reassembler.evictExpired()).toEqual([]);
    clock.now += 1;
    expect(reassembler.evictExpired()).toEqual([{ messageId: 5, received: 4, count: 5 }]);
    expect(reassembler.pendingBytes).toBe(0);
    expectReason(reassembler.push(chunks[4] as Uint8Array), 'dropped');
  });

  it('an index out of range, a bad count, a chunk of the wrong length', () => {
    const { reassembler } = setup();
    expectReason(reassembler.push(rawChunk(1, 5, 5, 1000, 200)), 'index-out-of-range');
    expectReason(reassembler.push(rawChunk(1, 0, 0, 1000, 0)), 'bad-count');
    expectReason(reassembler.push(rawChunk(1, 0, 1001, 1000, 1)), 'bad-count');
    expectReason(reassembler.push(rawChunk(2, 0, 5, 1000, 199)), 'chunk-length');
    expectReason(reassembler.push(rawChunk(2, 1, 5, 1000, 200)), 'dropped');
    expect(reassembler.push(rawChunk(3, 0, 1, 0, 0))).toMatchObject({ status: 'complete', messageId: 3 });
  });

  it('a chunk that contradicts its message drops the message', () => {
    const { reassembler } = setup();
    expect(reassembler.push(chunks[0] as Uint8Array).status).toBe('pending');
    expectReason(reassembler.push(rawChunk(5, 1, 4, 1000, 250)), 'inconsistent');
    expect(reassembler.pendingMessages).toBe(0);
    expectReason(reassembler.push(chunks[1] as Uint8Array), 'dropped');
  });

  it('oversized chunks and totals, and more pending messages or bytes than allowed', () => {
    const { reassembler } = setup({
      maxMessageBytes: 5000,
      maxChunkBytes: 300,
      maxPendingMessages: 2,
      maxPendingBytes: 6000,
    });
    expectReason(reassembler.push(rawChunk(1, 0, 1, 301, 301)), 'chunk-too-large');
    expectReason(reassembler.push(rawChunk(1, 0, 100, 0xffff_ffff, 0)), 'message-too-large');
    expect(reassembler.push(rawChunk(1, 0, 20, 4000, 200)).status).toBe('pending');
    expectReason(reassembler.push(rawChunk(2, 0, 20, 4000, 200)), 'over-budget');
    expect(reassembler.push(rawChunk(3, 0, 10, 1000, 100)).status).toBe('pending');
    expectReason(reassembler.push(rawChunk(4, 0, 1, 10, 10)), 'too-many-pending');
    expect(reassembler.pendingBytes).toBe(4000 + 20 + 1000 + 10);
    reassembler.clear();
    expect(reassembler.push(rawChunk(4, 0, 1, 10, 10)).status).toBe('complete');
  });

  it('what is not a chunk', () => {
    const { reassembler } = setup();
    expectReason(reassembler.push(new Uint8Array(5)), 'chunk-too-short');
    expectReason(reassembler.push(new Uint8Array(40)), 'chunk-magic');
    const wrongVersion = (chunks[0] as Uint8Array).slice();
    wrongVersion[2] = 9;
    expectReason(reassembler.push(wrongVersion), 'chunk-version');
    expect(readChunkHeader('x' as unknown as Uint8Array)).toBe('chunk-too-short');
  });

  it('never throws on random or mutated chunks, and memory stays within its budget', () => {
    const random = seededRandom(14);
    const { clock, reassembler } = setup({ maxPendingBytes: 1 << 20, maxMessageBytes: 1 << 19 });
    const valid = chunkMessage(randomBytes(5000, random), 300, 9);
    const statuses = new Map<string, number>();
    for (let i = 0; i < 5000; i++) {
      clock.now += random() * 100;
      let chunk: Uint8Array;
      if (random() < 0.3) chunk = randomBytes(Math.floor(random() * 80), random);
      else {
        chunk = (valid[Math.floor(random() * valid.length)] as Uint8Array).slice();
        for (let flips = Math.floor(random() * 3); flips > 0; flips--) {
          chunk[Math.floor(random() * CHUNK_HEADER_BYTES)] = Math.floor(random() * 256);
        }
      }
      const result = reassembler.push(chunk);
      const key = result.status === 'rejected' ? result.reason : result.status;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      expect(reassembler.pendingBytes).toBeLessThanOrEqual(1 << 20);
    }
    expect(statuses.get('pending')).toBeGreaterThan(0);
    expect(statuses.get('duplicate')).toBeGreaterThan(0);
    expect(statuses.get('chunk-magic')).toBeGreaterThan(0);
  });
});

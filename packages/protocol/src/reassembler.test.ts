import { describe, expect, it } from 'vitest';
import {
  CHUNK_HEADER_BYTES,
  chunkCount,
  chunkMessage,
  chunkSpan,
  iterateChunks,
  readChunkHeader,
  writeChunkHeader,
} from './chunks.ts';
import { MAX_CHUNK_BYTES, PENDING_CHUNK_OVERHEAD_BYTES } from './limits.ts';
import { ByteBudget, type PushResult, Reassembler, type ReassemblerOptions } from './reassembler.ts';
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

  it('oversized chunks and totals, more pending messages than allowed, and messages over the byte budget', () => {
    const { reassembler } = setup({
      maxMessageBytes: 5000,
      maxChunkBytes: 300,
      maxPendingMessages: 2,
      maxPendingBytes: 6000,
    });
    const perChunk = 200 + PENDING_CHUNK_OVERHEAD_BYTES;
    expectReason(reassembler.push(rawChunk(1, 0, 1, 301, 301)), 'chunk-too-large');
    expectReason(reassembler.push(rawChunk(1, 0, 100, 0xffff_ffff, 0)), 'message-too-large');
    // 2000 + 10·256 = 4560 bytes fit the 6000-byte budget: admitted, charged one chunk
    expect(reassembler.push(rawChunk(1, 0, 10, 2000, 200)).status).toBe('pending');
    expect(reassembler.pendingBytes).toBe(perChunk);
    // 3000 + 15·256 = 6840 could never fit: refused at its first chunk, the rest refused by name
    expectReason(reassembler.push(rawChunk(2, 0, 15, 3000, 200)), 'over-budget');
    expectReason(reassembler.push(rawChunk(2, 1, 15, 3000, 200)), 'dropped');
    expect(reassembler.push(rawChunk(3, 0, 10, 2000, 200)).status).toBe('pending');
    expectReason(reassembler.push(rawChunk(4, 0, 1, 10, 10)), 'too-many-pending');
    expect(reassembler.pendingBytes).toBe(2 * perChunk);
    // each fits alone, both do not: the message whose chunk overflows is dropped, the other completes
    const results: PushResult[] = [];
    for (let index = 1; index < 10; index++) {
      results.push(reassembler.push(rawChunk(1, index, 10, 2000, 200)));
      results.push(reassembler.push(rawChunk(3, index, 10, 2000, 200)));
    }
    const overflow = results.find((r) => r.status === 'rejected');
    expect(overflow).toMatchObject({ status: 'rejected', reason: 'over-budget', messageId: 3 });
    expect(results.filter((r) => r.status === 'complete').map((r) => r.messageId)).toEqual([1]);
    expect(reassembler.pendingBytes).toBe(0);
    expect(reassembler.peakPendingBytes).toBeLessThanOrEqual(6000);
    expectReason(reassembler.push(rawChunk(4, 0, 1, 10, 10)), 'dropped'); // refused once, refused by name
    expect(reassembler.push(rawChunk(5, 0, 1, 10, 10)).status).toBe('complete');
  });

  it('clear() gives every held byte back to a shared budget', () => {
    const budget = new ByteBudget(10_000);
    const { reassembler } = setup({ budget });
    expect(budget.tryTake(1000)).toBe(true); // another buffer of the same peer
    expect(reassembler.push(rawChunk(1, 0, 10, 2000, 200)).status).toBe('pending');
    expect(budget.held).toBe(1000 + 200 + PENDING_CHUNK_OVERHEAD_BYTES);
    reassembler.clear();
    expect(budget.held).toBe(1000);
    expect(reassembler.pendingBytes).toBe(0);
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
    // a fresh valid message every 250 pushes: a refused chunk drops its message for good
    const messages = Array.from({ length: 20 }, (_, k) => chunkMessage(randomBytes(5000, random), 300, 9 + k));
    const statuses = new Map<string, number>();
    for (let i = 0; i < 5000; i++) {
      clock.now += random() * 100;
      let chunk: Uint8Array;
      if (random() < 0.3) chunk = randomBytes(Math.floor(random() * 80), random);
      else {
        const valid = messages[Math.floor(i / 250)] as Uint8Array[];
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

describe('Reassembler memory grows with the bytes that arrive', () => {
  const MiB = 1024 * 1024;

  /** Chunk `index` of a message that declares `totalBytes` in 16 KiB chunks, its data zeros. */
  function announced(messageId: number, index: number, totalBytes: number): Uint8Array {
    const count = chunkCount(totalBytes, 16 * 1024);
    const [start, end] = chunkSpan(index, count, totalBytes);
    return rawChunk(messageId, index, count, totalBytes, end - start);
  }

  // Before (a buffer of the declared total at the first chunk): 268,451,861 bytes reserved and
  // 255.8 MiB of ArrayBuffers allocated by these two chunks.
  it('two 16 KiB chunks announcing 256 MiB hold 2 chunks (about 33 KB), not the 256 MiB declared', () => {
    const { reassembler } = setup();
    const arrayBuffersBefore = process.memoryUsage().arrayBuffers;
    for (const index of [0, 1]) expect(reassembler.push(announced(7, index, 256 * MiB)).status).toBe('pending');
    const allocated = process.memoryUsage().arrayBuffers - arrayBuffersBefore;
    const twoChunks = 2 * (16 * 1024 - CHUNK_HEADER_BYTES + PENDING_CHUNK_OVERHEAD_BYTES);
    console.log(`256 MiB announced in 2 chunks: ${reassembler.pendingBytes} bytes held, ${allocated} allocated`);
    expect(reassembler.pendingBytes).toBe(twoChunks);
    expect(reassembler.peakPendingBytes).toBe(twoChunks);
    expect(allocated).toBeLessThan(1 * MiB);
  });

  it('a message above the limit set later is refused at its first chunk; one in progress goes on', () => {
    const { reassembler } = setup();
    expect(reassembler.push(announced(1, 0, 3 * MiB)).status).toBe('pending');
    reassembler.setMaxMessageBytes(2 * MiB);
    const refused = reassembler.push(announced(2, 0, 256 * MiB));
    expect(refused).toMatchObject({ status: 'rejected', reason: 'message-too-large', messageId: 2 });
    expect((refused as { detail: string }).detail).toContain(`exceeds ${2 * MiB}`);
    expect(reassembler.push(announced(1, 1, 3 * MiB)).status).toBe('pending');
    expect(() => reassembler.setMaxMessageBytes(0)).toThrow(RangeError);
    expect(() => reassembler.setMaxMessageBytes(2 ** 32)).toThrow(RangeError);
  });

  it('a 6 MiB message at 64 KiB chunks, in order and shuffled: byte for byte, holding what has arrived', () => {
    const random = seededRandom(15);
    const message = randomBytes(6 * MiB, random);
    const chunks = chunkMessage(message, MAX_CHUNK_BYTES, 3);
    const perChunkOverhead = PENDING_CHUNK_OVERHEAD_BYTES;
    for (const order of [chunks, shuffled(chunks, random)]) {
      const { reassembler } = setup();
      const half = Math.floor(order.length / 2);
      let heldAtHalf = 0;
      let last: PushResult | undefined;
      for (const [i, chunk] of order.entries()) {
        last = reassembler.push(chunk);
        if (i === half - 1) heldAtHalf = reassembler.pendingBytes;
      }
      expect(last?.status === 'complete' && sameBytes(last.bytes, message)).toBe(true);
      const halfData = order.slice(0, half).reduce((sum, c) => sum + c.length - CHUNK_HEADER_BYTES, 0);
      expect(heldAtHalf).toBe(halfData + half * perChunkOverhead);
      // the peak: every chunk held, just before they are joined
      expect(reassembler.peakPendingBytes).toBe(message.length + chunks.length * perChunkOverhead);
      expect(reassembler.pendingBytes).toBe(0);
    }
  });
});

describe('ByteBudget', () => {
  it('takes what fits, releases, keeps its peak, and takes a new limit for later takes', () => {
    const budget = new ByteBudget(100);
    expect(budget.tryTake(60)).toBe(true);
    expect(budget.tryTake(41)).toBe(false);
    expect(budget.tryTake(40)).toBe(true);
    expect(budget.free).toBe(0);
    budget.release(70);
    expect([budget.held, budget.peak, budget.free]).toEqual([30, 100, 70]);
    budget.setLimit(20);
    expect(budget.free).toBe(0);
    expect(budget.tryTake(1)).toBe(false);
    expect(() => budget.setLimit(-1)).toThrow(RangeError);
    expect(() => new ByteBudget(Number.NaN)).toThrow(RangeError);
  });
});

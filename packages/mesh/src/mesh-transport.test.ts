import { createHash } from 'node:crypto';
import {
  CHUNK_HEADER_BYTES,
  chunkCount,
  chunkMessage,
  maxMessageBytesFor,
  PENDING_CHUNK_OVERHEAD_BYTES,
  writeChunkHeader,
} from '@shoal/protocol';
import { RUN_CONFIG } from '@shoal/protocol/test-fixtures';
import { describe, expect, it } from 'vitest';
import { encodeControl } from './control.ts';
import { closeAll, connectedMesh, until } from './test-mesh.ts';

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function pattern(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed) & 0xff;
  return bytes;
}

describe('MeshTransport over @roamhq/wrtc', () => {
  it('connects two peers and exchanges messages both ways, in order', async () => {
    const [a, b] = await connectedMesh(2);
    if (!a || !b) throw new Error('mesh');
    expect(a.ups).toEqual(['b']);
    expect(b.ups).toEqual(['a']);
    const atA: Uint8Array[] = [];
    const atB: Uint8Array[] = [];
    a.transport.on('message', (from, bytes) => from === 'b' && atA.push(bytes));
    b.transport.on('message', (from, bytes) => from === 'a' && atB.push(bytes));
    // sizes around the 16 KiB chunk (16364 data bytes per chunk), the empty message included
    const sizes = [0, 1, 100, 16_363, 16_364, 16_365, 70_000, 5, 300_000, 2];
    const sends = sizes.flatMap((size, i) => [
      a.transport.send('b', pattern(size, i)),
      b.transport.send('a', pattern(size, 100 + i)),
    ]);
    await Promise.all(sends);
    await until(() => atA.length === sizes.length && atB.length === sizes.length, 5000, 'all messages');
    // hashes: a deep equal over 300 KB arrays takes seconds
    expect(atB.map(sha256)).toEqual(sizes.map((size, i) => sha256(pattern(size, i))));
    expect(atA.map(sha256)).toEqual(sizes.map((size, i) => sha256(pattern(size, 100 + i))));
    expect(a.transport.rejections.total()).toBe(0);
    await closeAll([a, b]);
  });

  it('connects three peers in a full mesh', async () => {
    const nodes = await connectedMesh(3);
    const received = new Map<string, string[]>();
    for (const node of nodes) {
      node.transport.on('message', (from, bytes) => {
        const key = node.transport.self;
        received.set(key, [...(received.get(key) ?? []), `${from}:${new TextDecoder().decode(bytes)}`]);
      });
    }
    for (const node of nodes) {
      expect(node.transport.peers().sort()).toHaveLength(2);
      for (const peer of node.transport.peers()) {
        await node.transport.send(peer, new TextEncoder().encode(`${node.transport.self}->${peer}`));
      }
    }
    await until(() => [...received.values()].flat().length === 6, 5000, 'six messages');
    expect(received.get('a')?.sort()).toEqual(['b:b->a', 'c:c->a']);
    expect(received.get('b')?.sort()).toEqual(['a:a->b', 'c:c->b']);
    expect(received.get('c')?.sort()).toEqual(['a:a->c', 'b:b->c']);
    await closeAll(nodes);
  });

  it('moves a 50 MB message intact with bounded bufferedAmount', async () => {
    const highWaterMark = 1024 * 1024;
    const [a, b] = await connectedMesh(2, { highWaterMark, lowWaterMark: 256 * 1024 });
    if (!a || !b) throw new Error('mesh');
    const size = 50 * 1024 * 1024;
    const message = pattern(size, 7);
    const expected = sha256(message);
    let receivedHash = '';
    b.transport.on('message', (_from, bytes) => {
      receivedHash = sha256(bytes);
    });
    const started = performance.now();
    await a.transport.send('b', message);
    await until(() => receivedHash !== '', 20_000, 'the 50 MB message');
    const seconds = (performance.now() - started) / 1000;
    const peak = a.transport.stats.peakBufferedAmount;
    console.log(
      `50 MB in ${seconds.toFixed(2)} s = ${(size / 1e6 / seconds).toFixed(1)} MB/s, peak bufferedAmount ${peak} B`,
    );
    expect(receivedHash).toBe(expected);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(highWaterMark + 16 * 1024 + 64);
    // the receiver held the message's chunks as they came, then joined them: data + overhead
    const chunks = chunkCount(size, 16 * 1024);
    expect(b.transport.stats.peakPeerHeldBytes).toBe(size + chunks * PENDING_CHUNK_OVERHEAD_BYTES);
    expect(b.transport.peerBuffers('a')).toMatchObject({ heldBytes: 0, reassemblyBytes: 0 });
    await closeAll([a, b]);
  });

  it('reports a crashed peer down on the other side', async () => {
    const [a, b] = await connectedMesh(2);
    if (!a || !b) throw new Error('mesh');
    b.transport.testing.crash();
    await until(() => a.downs.length === 1, 10_000, 'peer-down at a');
    expect(a.downs[0]?.peer).toBe('b');
    expect(['closed', 'connection-failed', 'error']).toContain(a.downs[0]?.reason.code);
    expect(a.transport.peers()).toEqual([]);
    await expect(a.transport.send('b', new Uint8Array(1))).rejects.toMatchObject({ code: 'peer-not-up' });
    await a.transport.close();
  });

  it('rejects a send in progress when its peer goes down', async () => {
    const [a, b] = await connectedMesh(2);
    if (!a || !b) throw new Error('mesh');
    let firstBytes = false;
    b.transport.on('message', () => {});
    const sending = a.transport.send('b', pattern(30 * 1024 * 1024, 2));
    const outcome = sending.then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await until(() => (firstBytes = b.transport.stats.bytesReceived > 1024 * 1024), 5000, 'the first megabyte');
    expect(firstBytes).toBe(true);
    b.transport.testing.crash();
    expect(await outcome).toMatchObject({ name: 'TransportError', code: 'peer-not-up' });
    expect(a.downs).toHaveLength(1);
    await a.transport.close();
  });

  it('times out a peer that stops answering pings', async () => {
    const [a, b] = await connectedMesh(2, { heartbeatIntervalMs: 50, heartbeatTimeoutMs: 300 });
    if (!a || !b) throw new Error('mesh');
    await new Promise((resolve) => setTimeout(resolve, 400)); // pings answered: nobody goes down
    expect(a.downs).toEqual([]);
    b.transport.testing.pausePongs(true);
    await until(() => a.downs.length === 1, 3000, 'heartbeat timeout');
    expect(a.downs[0]).toMatchObject({ peer: 'b', reason: { code: 'timeout' } });
    // a destroyed the connection, so b sees it go too
    await until(() => b.downs.length === 1, 5000, 'peer-down at b');
    expect(b.downs[0]?.peer).toBe('a');
    await closeAll([a, b]);
  });

  it('drops and counts garbage, and keeps delivering good messages', async () => {
    const [a, b] = await connectedMesh(2);
    if (!a || !b) throw new Error('mesh');
    const atB: Uint8Array[] = [];
    b.transport.on('message', (_from, bytes) => atB.push(bytes));
    const raw = (frame: Uint8Array) => a.transport.testing.sendRaw('b', frame);
    raw(Uint8Array.of(1, 2, 3)); // too short
    raw(new Uint8Array(100).fill(0xaa)); // wrong magic
    raw(Uint8Array.of(0x53, 0x6b, 1, 9, 0, 0, 0, 0)); // control frame of unknown kind
    const [good] = chunkMessage(pattern(1000, 1), 16 * 1024, 999);
    if (!good) throw new Error('chunk');
    raw(good.subarray(0, 500)); // truncated chunk
    const [bigDeclared] = chunkMessage(pattern(10, 1), 16 * 1024, 1000);
    if (!bigDeclared) throw new Error('chunk');
    new DataView(bigDeclared.buffer).setUint32(16, 0xffff_ffff, true); // claims 4 GiB
    raw(bigDeclared);
    await a.transport.send('b', pattern(40_000, 3));
    await until(() => atB.length === 1, 5000, 'the good message');
    expect(atB[0]).toEqual(pattern(40_000, 3));
    expect(b.transport.rejections.total()).toBe(5);
    expect(b.transport.rejections.byReason()).toMatchObject({
      'chunk-too-short': 1,
      'chunk-magic': 1,
      control: 1,
      'chunk-length': 1,
      'message-too-large': 1,
    });
    expect(b.transport.peers()).toEqual(['a']);
    await closeAll([a, b]);
  });

  it('close() makes the remote see peer-down "left", and later sends reject', async () => {
    const [a, b, c] = await connectedMesh(3);
    if (!a || !b || !c) throw new Error('mesh');
    await a.transport.close();
    await until(() => b.downs.length === 1 && c.downs.length === 1, 5000, 'peer-down at b and c');
    expect(b.downs[0]).toMatchObject({ peer: 'a', reason: { code: 'left' } });
    expect(c.downs[0]).toMatchObject({ peer: 'a', reason: { code: 'left' } });
    expect(a.downs).toEqual([]); // no event after close
    await expect(a.transport.send('b', new Uint8Array(1))).rejects.toMatchObject({ code: 'closed' });
    await a.transport.close(); // twice is harmless
    // b and c still talk
    const atC: Uint8Array[] = [];
    c.transport.on('message', (_from, bytes) => atC.push(bytes));
    await b.transport.send('c', encodeControl('ping').slice(0, 0));
    await until(() => atC.length === 1, 5000, 'b→c after a left');
    b.transport.removePeer('c');
    expect(b.downs.at(-1)).toMatchObject({ peer: 'c', reason: { code: 'left' } });
    await until(() => c.downs.length === 2, 5000, 'c sees b leave');
    expect(c.downs[1]).toMatchObject({ peer: 'b', reason: { code: 'left' } });
    await closeAll([b, c]);
  });

  it('rejects sends to unknown peers and oversized messages', async () => {
    const [a, b] = await connectedMesh(2, { maxMessageBytes: 1000 });
    if (!a || !b) throw new Error('mesh');
    await expect(a.transport.send('zz', new Uint8Array(1))).rejects.toMatchObject({ code: 'peer-not-up' });
    await expect(a.transport.send('b', new Uint8Array(1001))).rejects.toMatchObject({ code: 'too-large' });
    expect(() => a.transport.addPeer('a')).toThrow(RangeError);
    await closeAll([a, b]);
  });

  it('holds two chunks for a 256 MiB announcement, and refuses it at its first chunk once the run sets the limit', async () => {
    const [a, b] = await connectedMesh(2);
    if (!a || !b) throw new Error('mesh');
    const atB: Uint8Array[] = [];
    b.transport.on('message', (_from, bytes) => atB.push(bytes));
    const announcement = (messageId: number, index: number) => {
      const totalBytes = 256 * 1024 * 1024;
      const chunk = new Uint8Array(16 * 1024);
      writeChunkHeader(chunk, { messageId, index, count: chunkCount(totalBytes, 16 * 1024), totalBytes });
      return chunk;
    };
    const twoChunks = 2 * (16 * 1024 - CHUNK_HEADER_BYTES + PENDING_CHUNK_OVERHEAD_BYTES);
    // before the run is known (256 MiB allowed): held as it arrives, 33 KB, not 256 MiB
    a.transport.testing.sendRaw('b', announcement(1000, 0));
    a.transport.testing.sendRaw('b', announcement(1000, 1));
    await until(() => b.transport.peerBuffers('a')?.reassemblyBytes === twoChunks, 5000, 'two chunks held');
    expect(b.transport.stats.peakPeerHeldBytes).toBe(twoChunks);

    const limit = maxMessageBytesFor(RUN_CONFIG); // nano, P = 2: about 2 MiB
    b.transport.setMessageLimit(limit);
    expect(b.transport.messageLimit.maxMessageBytes).toBe(limit);
    a.transport.testing.sendRaw('b', announcement(1001, 0));
    await until(() => b.transport.rejections.total() === 1, 5000, 'the refusal');
    expect(b.transport.rejections.byReason()).toEqual({ 'message-too-large': 1 });
    expect(b.transport.rejections.recent()[0]).toMatchObject({
      from: 'a',
      detail: expect.stringContaining(`exceeds ${limit}`),
    });
    expect(b.transport.peerBuffers('a')?.reassemblyBytes).toBe(twoChunks); // the first one goes on

    // the limit holds for sends too, and a message within it still arrives
    b.transport.setMessageLimit(1000);
    await expect(b.transport.send('a', new Uint8Array(1001))).rejects.toMatchObject({ code: 'too-large' });
    b.transport.setMessageLimit(limit);
    await a.transport.send('b', pattern(limit - 1000, 4));
    await until(() => atB.length === 1, 10_000, 'a message under the limit');
    expect(sha256(atB[0] as Uint8Array)).toBe(sha256(pattern(limit - 1000, 4)));
    expect(() => b.transport.setMessageLimit(0)).toThrow(RangeError);
    await closeAll([a, b]);
  });

  it("refuses the new messages of a peer over its byte budget, while another peer's messages arrive", async () => {
    const budget = 200_000;
    const [a, b, c] = await connectedMesh(3, { maxPeerBufferedBytes: budget });
    if (!a || !b || !c) throw new Error('mesh');
    const atB: string[] = [];
    b.transport.on('message', (from, bytes) => atB.push(`${from}:${bytes.length}`));
    // a starts a 150 KB message and sends 6 of its 10 chunks (≈ 98 KB held at b)
    const partial = chunkMessage(pattern(150_000, 5), 16 * 1024, 2000).slice(0, 6);
    for (const chunk of partial) a.transport.testing.sendRaw('b', chunk);
    const held = partial.reduce(
      (sum, chunk) => sum + chunk.length - CHUNK_HEADER_BYTES + PENDING_CHUNK_OVERHEAD_BYTES,
      0,
    );
    await until(() => b.transport.peerBuffers('a')?.heldBytes === held, 5000, 'six chunks held');
    // a's next message (150 KB more) does not fit what is left of its 200 KB: refused, counted
    await a.transport.send('b', pattern(150_000, 6));
    await until(() => b.transport.rejections.total() > 0, 5000, 'the refusal');
    // c's budget is its own: its 150 KB message arrives, and so does a's small one
    await c.transport.send('b', pattern(150_000, 7));
    await a.transport.send('b', pattern(1_000, 8));
    await until(() => atB.length === 2, 5000, "c's message and a's small one");
    expect(atB.sort()).toEqual(['a:1000', 'c:150000']); // no order across peers
    const byReason = b.transport.rejections.byReason();
    expect(byReason['over-budget']).toBe(1);
    expect(byReason.dropped).toBe(chunkCount(150_000, 16 * 1024) - 1); // the rest of the refused message
    expect(b.transport.rejections.recent().every((r) => r.from === 'a')).toBe(true);
    expect(b.transport.peerBuffers('a')).toMatchObject({ heldBytes: held, limitBytes: budget });
    expect(b.transport.peerBuffers('c')).toMatchObject({ heldBytes: 0, limitBytes: budget });
    expect(b.transport.peers().sort()).toEqual(['a', 'c']);
    await closeAll([a, b, c]);
  });
});

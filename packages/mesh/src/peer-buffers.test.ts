import { CHUNK_HEADER_BYTES, chunkMessage, PENDING_CHUNK_OVERHEAD_BYTES } from '@shoal/protocol';
import { describe, expect, it } from 'vitest';
import { EARLY_FRAMES_LIMIT, PeerBuffers } from './peer-buffers.ts';

const charge = (frame: Uint8Array) => frame.length + PENDING_CHUNK_OVERHEAD_BYTES;

describe('PeerBuffers', () => {
  it('early frames and reassembly share one budget', () => {
    const buffers = new PeerBuffers({ now: () => 0, budgetBytes: 10_000 });
    const chunks = chunkMessage(new Uint8Array(6000).fill(7), 1020, 1); // 6 chunks of 1000 data bytes
    const early = chunks.slice(0, 3);
    for (const frame of early) expect(buffers.holdEarly(frame)).toBeNull();
    const earlyBytes = early.reduce((sum, frame) => sum + charge(frame), 0);
    expect(buffers.stats()).toMatchObject({ heldBytes: earlyBytes, earlyFrames: 3, earlyBytes });
    // replayed through the reassembler: released as early frames, charged as chunks
    for (const frame of buffers.takeEarly()) expect(buffers.push(frame).status).toBe('pending');
    const reassembly =
      early.reduce((sum, frame) => sum + frame.length - CHUNK_HEADER_BYTES, 0) + 3 * PENDING_CHUNK_OVERHEAD_BYTES;
    expect(buffers.stats()).toMatchObject({ heldBytes: reassembly, earlyFrames: 0, reassemblyBytes: reassembly });
    const rest = chunks.slice(3).map((frame) => buffers.push(frame));
    expect(rest.at(-1)?.status).toBe('complete');
    expect(buffers.stats().heldBytes).toBe(0);
  });

  it('refuses early frames over the budget or the frame limit, and clear() releases them', () => {
    const buffers = new PeerBuffers({ now: () => 0, budgetBytes: 5000 });
    expect(buffers.holdEarly(new Uint8Array(3000))).toBeNull();
    expect(buffers.holdEarly(new Uint8Array(3000))).toMatch(/3256 of 5000 held/);
    buffers.clear();
    expect(buffers.stats().heldBytes).toBe(0);
    const roomy = new PeerBuffers({ now: () => 0, budgetBytes: 10 * 1024 * 1024 });
    for (let i = 0; i < EARLY_FRAMES_LIMIT; i++) expect(roomy.holdEarly(new Uint8Array(1))).toBeNull();
    expect(roomy.holdEarly(new Uint8Array(1))).toMatch(/frames arrived before the connection/);
  });

  it('new limits apply to messages that begin later', () => {
    const buffers = new PeerBuffers({ now: () => 0, budgetBytes: 1_000_000 });
    const [first] = chunkMessage(new Uint8Array(50_000), 16 * 1024, 1);
    expect(buffers.push(first as Uint8Array).status).toBe('pending');
    buffers.setLimits(10_000, 20_000);
    const [other] = chunkMessage(new Uint8Array(50_000), 16 * 1024, 2);
    expect(buffers.push(other as Uint8Array)).toMatchObject({ status: 'rejected', reason: 'message-too-large' });
    expect(buffers.stats().limitBytes).toBe(20_000);
  });
});

/**
 * Both ends of a throughput measurement, shared by the Node bench and the Chromium page
 * (bench/mesh-page): the same code times a MeshTransport and a raw RTCDataChannel, in Node with
 * @roamhq/wrtc and in the browser with its own WebRTC.
 *
 * A transfer is timed from just before the sender's first byte to the moment the whole message is
 * in the receiver's hands (MeshTransport's 'message' event; the raw receiver's last byte copied
 * into place). Payloads are made and hashed outside the timed span; the receiver hashes (SHA-256)
 * what it got after recording the time, and the caller compares it with the sender's hash.
 * Times are `clockMs()`, performance.timeOrigin + performance.now(), so that two pages of one
 * browser, each with its own time origin, read the same clock.
 */

import { waitForDrain } from '../../packages/mesh/src/drain.ts';
import type { MeshTransport } from '../../packages/mesh/src/mesh-transport.ts';

/** MeshTransport's default water marks, so the raw channel is paced the same way. */
export const HIGH_WATER_MARK = 1024 * 1024;
export const LOW_WATER_MARK = 256 * 1024;

export const clockMs = (): number => performance.timeOrigin + performance.now();

export interface SendReport {
  startMs: number;
  sha256: string;
  /** Largest bufferedAmount seen right after a send during this transfer (bytes). */
  peakBufferedAmount: number;
}

export interface Delivery {
  endMs: number;
  sha256: string;
  bytes: number;
}

/** `size` pseudo-random bytes (xorshift32 from `seed`): cheap to make, not compressible. */
export function payload(size: number, seed: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  const words = new Uint32Array(bytes.buffer, 0, size >>> 2);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  for (let i = words.length * 4; i < size; i++) bytes[i] = i & 0xff;
  return bytes;
}

export async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Received messages with their arrival times, handed out in order; waits when none is queued. */
class Inbox {
  private readonly queue: { bytes: Uint8Array; endMs: number }[] = [];
  private waiter: (() => void) | null = null;

  put(bytes: Uint8Array, endMs: number): void {
    this.queue.push({ bytes, endMs });
    this.waiter?.();
  }

  async next(): Promise<Delivery> {
    while (this.queue.length === 0) await new Promise<void>((resolve) => (this.waiter = resolve));
    this.waiter = null;
    const { bytes, endMs } = this.queue.shift() as { bytes: Uint8Array; endMs: number };
    return { endMs, sha256: await sha256(bytes), bytes: bytes.length };
  }
}

/** One side of a MeshTransport pair: sends whole messages, receives them through the transport. */
export class ShoalEndpoint {
  private readonly inbox = new Inbox();

  constructor(readonly transport: MeshTransport) {
    transport.on('message', (_from, bytes) => this.inbox.put(bytes, clockMs()));
  }

  async send(to: string, size: number, seed: number): Promise<SendReport> {
    const bytes = payload(size, seed);
    const hash = await sha256(bytes);
    this.transport.stats.peakBufferedAmount = 0;
    const startMs = clockMs();
    await this.transport.send(to, bytes);
    return { startMs, sha256: hash, peakBufferedAmount: this.transport.stats.peakBufferedAmount };
  }

  next(): Promise<Delivery> {
    return this.inbox.next();
  }
}

/**
 * One side of a raw RTCDataChannel: the sender cuts the bytes into `chunkBytes` pieces with no
 * header and paces them with MeshTransport's own `waitForDrain`; the receiver, told the size
 * beforehand (`expect`), copies pieces into place until it has them all.
 */
export class RawEndpoint {
  private readonly inbox = new Inbox();
  private expected: { bytes: Uint8Array; at: number } | null = null;
  private readonly abort = new AbortController();

  constructor(readonly channel: RTCDataChannel) {
    channel.binaryType = 'arraybuffer';
    channel.addEventListener('message', (event: MessageEvent<ArrayBuffer>) => this.onPiece(event.data));
  }

  expect(size: number): void {
    this.expected = { bytes: new Uint8Array(size), at: 0 };
  }

  async send(size: number, seed: number, chunkBytes: number): Promise<SendReport> {
    const bytes = payload(size, seed);
    const hash = await sha256(bytes);
    const { channel } = this;
    let peak = 0;
    const startMs = clockMs();
    for (let at = 0; at < size; at += chunkBytes) {
      if (channel.bufferedAmount > HIGH_WATER_MARK) await waitForDrain(channel, LOW_WATER_MARK, this.abort.signal);
      channel.send(bytes.subarray(at, Math.min(at + chunkBytes, size)));
      if (channel.bufferedAmount > peak) peak = channel.bufferedAmount;
    }
    return { startMs, sha256: hash, peakBufferedAmount: peak };
  }

  next(): Promise<Delivery> {
    return this.inbox.next();
  }

  close(): void {
    this.abort.abort();
    this.channel.close();
  }

  private onPiece(data: ArrayBuffer): void {
    const expected = this.expected;
    if (!expected) throw new Error(`raw channel: ${data.byteLength} bytes arrived unexpected`);
    expected.bytes.set(new Uint8Array(data), expected.at);
    expected.at += data.byteLength;
    if (expected.at === expected.bytes.length) {
      this.expected = null;
      this.inbox.put(expected.bytes, clockMs());
    }
  }
}

/** What the two ends of a raw pair exchange to connect. */
export type RawSignal = { description: RTCSessionDescriptionInit } | { candidate: RTCIceCandidateInit };

export interface RawSignaling {
  send(signal: RawSignal): void;
  onSignal(listener: (signal: RawSignal) => void): void;
}

/**
 * Connects one end of a raw pair: a pre-negotiated ordered channel (id 0, so neither side waits
 * for 'datachannel'), trickled candidates. Resolves when the channel is open.
 */
export async function openRawChannel(
  Connection: typeof RTCPeerConnection,
  initiator: boolean,
  signaling: RawSignaling,
  timeoutMs = 20_000,
): Promise<{ connection: RTCPeerConnection; channel: RTCDataChannel }> {
  const connection = new Connection();
  const channel = connection.createDataChannel('raw', { negotiated: true, id: 0, ordered: true });
  connection.addEventListener('icecandidate', (event: RTCPeerConnectionIceEvent) => {
    if (event.candidate) signaling.send({ candidate: event.candidate.toJSON() });
  });
  // one signal at a time, in order: a candidate must not overtake the description before it
  let handled = Promise.resolve();
  const handle = async (signal: RawSignal) => {
    if ('candidate' in signal) {
      await connection.addIceCandidate(signal.candidate);
      return;
    }
    await connection.setRemoteDescription(signal.description);
    if (signal.description.type === 'offer') {
      await connection.setLocalDescription(await connection.createAnswer());
      signaling.send({ description: toInit(connection.localDescription) });
    }
  };
  signaling.onSignal((signal) => {
    handled = handled.then(() => handle(signal));
  });
  if (initiator) {
    await connection.setLocalDescription(await connection.createOffer());
    signaling.send({ description: toInit(connection.localDescription) });
  }
  // @roamhq/wrtc does not always fire 'open' on a negotiated channel: poll its state as well
  const deadline = performance.now() + timeoutMs;
  while (channel.readyState !== 'open') {
    if (performance.now() > deadline) throw new Error(`raw channel did not open within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return { connection, channel };
}

function toInit(description: RTCSessionDescription | null): RTCSessionDescriptionInit {
  if (!description) throw new Error('no local description');
  return { type: description.type, sdp: description.sdp };
}

/**
 * One end of the benchmark's browser pairs (bench/mesh/browser.ts loads this page twice, as
 * ?id=a and ?id=b). Playwright drives it through `window.meshBench`; the two pages signal to each
 * other over a BroadcastChannel (same origin, same browser context). The MeshTransport here is
 * the real one, bundled by Vite with the web app's shim settings (vite.shims.ts).
 */
import { MeshTransport } from '@shoal/mesh';
import {
  type Delivery,
  openRawChannel,
  RawEndpoint,
  type RawSignal,
  type SendReport,
  ShoalEndpoint,
} from '../mesh/endpoints.ts';

const self = new URLSearchParams(location.search).get('id') ?? 'a';

interface Envelope {
  key: string;
  from: string;
  to: string;
  data: unknown;
}

// Signals can come before this page has made the connection they belong to: queue them until then.
const bus = new BroadcastChannel('shoal-mesh-bench');
const listeners = new Map<string, (from: string, data: unknown) => void>();
const early: Envelope[] = [];
bus.onmessage = ({ data }: MessageEvent<Envelope>) => {
  if (data.to !== self) return;
  const listener = listeners.get(data.key);
  if (listener) listener(data.from, data.data);
  else early.push(data);
};
const post = (key: string, to: string, data: unknown) => bus.postMessage({ key, from: self, to, data });
function listen(key: string, listener: (from: string, data: unknown) => void): void {
  listeners.set(key, listener);
  for (const envelope of early.filter((e) => e.key === key)) {
    early.splice(early.indexOf(envelope), 1);
    listener(envelope.from, envelope.data);
  }
}

const shoal = new Map<string, ShoalEndpoint>();
const raw = new Map<string, RawEndpoint>();

const meshBench = {
  async connectShoal(key: string, peer: string, maxChunkBytes: number): Promise<void> {
    let failed: (reason: Error) => void = () => {};
    const transport = new MeshTransport({
      self,
      maxChunkBytes,
      sendSignal: (to, data) => post(key, to, data),
      onConnectFailed: (_peer, reason) => failed(new Error(`${key}: ${reason.code}: ${reason.message}`)),
    });
    listen(key, (from, data) => transport.handleSignal(from, data as Parameters<MeshTransport['handleSignal']>[1]));
    const up = new Promise<void>((resolve, reject) => {
      failed = reject;
      transport.on('peer-up', () => resolve());
    });
    transport.addPeer(peer);
    await up;
    shoal.set(key, new ShoalEndpoint(transport));
  },

  /** Resolves with the negotiated SCTP max message size (null where the browser does not say). */
  async connectRaw(key: string, peer: string): Promise<number | null> {
    const { connection, channel } = await openRawChannel(RTCPeerConnection, self < peer, {
      send: (signal) => post(key, peer, signal),
      onSignal: (listener) => listen(key, (_from, data) => listener(data as RawSignal)),
    });
    raw.set(key, new RawEndpoint(channel));
    return connection.sctp?.maxMessageSize ?? null;
  },

  expect(key: string, size: number): void {
    raw.get(key)?.expect(size);
  },

  send(key: string, to: string, size: number, seed: number, chunkBytes: number): Promise<SendReport> {
    const endpoint = shoal.get(key);
    if (endpoint) return endpoint.send(to, size, seed);
    const channel = raw.get(key);
    if (!channel) throw new Error(`no connection ${key}`);
    return channel.send(size, seed, chunkBytes);
  },

  next(key: string): Promise<Delivery> {
    const endpoint = shoal.get(key) ?? raw.get(key);
    if (!endpoint) throw new Error(`no connection ${key}`);
    return endpoint.next();
  },
};

export type MeshBench = typeof meshBench;
(window as unknown as { meshBench: MeshBench }).meshBench = meshBench;

/**
 * The Node side: MeshTransport pairs (packages/mesh's test wiring: @roamhq/wrtc, in-process
 * signaling) and a raw @roamhq/wrtc RTCPeerConnection pair with in-process signaling, all on
 * loopback in this one process.
 */
import * as wrtcModule from '@roamhq/wrtc';
import { closeAll, connectedMesh, type TestNode } from '../../packages/mesh/src/test-mesh.ts';
import { openRawChannel, RawEndpoint, type RawSignal, type RawSignaling, ShoalEndpoint } from './endpoints.ts';
import type { Variant } from './throughput.ts';

// CommonJS: Node's ESM loader puts module.exports on `default`
const wrtc = ((wrtcModule as { default?: unknown }).default ?? wrtcModule) as {
  RTCPeerConnection: typeof RTCPeerConnection;
};

export interface Pairs {
  variants: Variant[];
  close: () => Promise<void>;
}

/** A Shoal pair per `shoalChunks` entry and one raw pair, used at each of `rawChunks`. */
export async function nodePairs(
  shoalChunks: number[],
  rawChunks: (maxMessageSize: number) => number[],
): Promise<Pairs> {
  const meshes: TestNode[][] = [];
  const variants: Variant[] = [];
  for (const chunkBytes of shoalChunks) {
    const nodes = await connectedMesh(2, { maxChunkBytes: chunkBytes });
    meshes.push(nodes);
    const [a, b] = nodes.map((node) => new ShoalEndpoint(node.transport)) as [ShoalEndpoint, ShoalEndpoint];
    variants.push({
      transport: 'shoal',
      chunkBytes,
      send: (size, seed) => a.send('b', size, seed),
      next: () => b.next(),
    });
  }
  const [sender, receiver] = await rawPair();
  const maxMessageSize = sender.connection.sctp?.maxMessageSize ?? 64 * 1024;
  const a = new RawEndpoint(sender.channel);
  const b = new RawEndpoint(receiver.channel);
  for (const chunkBytes of rawChunks(maxMessageSize)) {
    variants.push({
      transport: 'raw',
      chunkBytes,
      expect: async (size) => b.expect(size),
      send: (size, seed) => a.send(size, seed, chunkBytes),
      next: () => b.next(),
    });
  }
  return {
    variants,
    close: async () => {
      a.close();
      b.close();
      sender.connection.close();
      receiver.connection.close();
      for (const nodes of meshes) await closeAll(nodes);
    },
  };
}

/** Two raw ends, signaling by direct calls a microtask apart. */
async function rawPair() {
  const inboxes: ((signal: RawSignal) => void)[][] = [[], []];
  const signaling = (side: 0 | 1): RawSignaling => ({
    // a JSON round trip, as a signaling socket would do (and wrtc's candidates are objects)
    send: (signal) => {
      const copy = JSON.parse(JSON.stringify(signal)) as RawSignal;
      queueMicrotask(() => {
        for (const listener of inboxes[1 - side] ?? []) listener(copy);
      });
    },
    onSignal: (listener) => inboxes[side]?.push(listener),
  });
  return Promise.all([
    openRawChannel(wrtc.RTCPeerConnection, true, signaling(0)),
    openRawChannel(wrtc.RTCPeerConnection, false, signaling(1)),
  ]);
}

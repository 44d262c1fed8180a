/**
 * Test helpers: MeshTransports wired to each other in-process, with a direct function call as
 * signaling, on real @roamhq/wrtc peer connections over loopback.
 */
import * as wrtcModule from '@roamhq/wrtc';
import type { PeerDownReason, PeerId } from '@shoal/protocol';
import type { MeshTransportOptions, WrtcImplementation } from './mesh-options.ts';
import { MeshTransport } from './mesh-transport.ts';

// CommonJS: Node's ESM loader puts module.exports on `default`
const wrtc = ((wrtcModule as { default?: unknown }).default ?? wrtcModule) as unknown as WrtcImplementation;

// Fail loudly, never skip: a mesh test without WebRTC tests nothing.
if (typeof wrtc.RTCPeerConnection !== 'function') {
  throw new Error('@roamhq/wrtc did not load an RTCPeerConnection: the mesh tests need it');
}

export type MeshOptions = Partial<Omit<MeshTransportOptions, 'self' | 'sendSignal'>>;

export interface TestNode {
  transport: MeshTransport;
  downs: { peer: PeerId; reason: PeerDownReason }[];
  ups: PeerId[];
}

/** N transports named a, b, c, …, all connected to each other; resolves when every pair is up. */
export async function connectedMesh(count: number, options: MeshOptions = {}): Promise<TestNode[]> {
  const ids = Array.from({ length: count }, (_, i) => String.fromCharCode(97 + i));
  const byId = new Map<PeerId, MeshTransport>();
  const nodes = ids.map((self): TestNode => {
    const transport = new MeshTransport({
      self,
      wrtc,
      // a microtask apart, as a signaling socket would be
      sendSignal: (to, data) => queueMicrotask(() => byId.get(to)?.handleSignal(self, data)),
      ...options,
    });
    byId.set(self, transport);
    const node: TestNode = { transport, downs: [], ups: [] };
    transport.on('peer-up', (peer) => node.ups.push(peer));
    transport.on('peer-down', (peer, reason) => node.downs.push({ peer, reason }));
    return node;
  });
  for (const node of nodes) for (const id of ids) if (id !== node.transport.self) node.transport.addPeer(id);
  await until(() => nodes.every((node) => node.transport.peers().length === count - 1), 10_000, 'mesh to connect');
  return nodes;
}

/** Polls `condition` every 5 ms; rejects naming `what` after `timeoutMs`. */
export async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export async function closeAll(nodes: TestNode[]): Promise<void> {
  await Promise.all(nodes.map((node) => node.transport.close()));
}

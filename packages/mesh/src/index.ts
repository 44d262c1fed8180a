/**
 * @shoal/mesh: the WebRTC Transport. One simple-peer data channel per remote member, with
 * protocol's chunking and reassembly, bufferedAmount backpressure and failure detection.
 * Signaling and the WebRTC implementation are injected, so the same code runs in browsers and
 * in Node (with @roamhq/wrtc).
 */
export * from './control.ts';
export * from './drain.ts';
export type { MeshStats, MeshTransportOptions, SignalData, WrtcImplementation } from './mesh-options.ts';
export * from './mesh-transport.ts';
export * from './peer-buffers.ts';
export * from './room-mesh.ts';

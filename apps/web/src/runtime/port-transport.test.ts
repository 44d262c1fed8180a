import { MessageChannel, type MessagePort } from 'node:worker_threads';
import {
  createIdentity,
  createWireCodec,
  type PeerId,
  PeerKeyRegistry,
  signedBytesOf,
  type Transport,
  TransportEmitter,
  TransportError,
  verifySignature,
} from '@shoal/protocol';
import { SAMPLES } from '@shoal/protocol/test-fixtures';
import { Member, wallClock } from '@shoal/swarm';
import { describe, expect, it } from 'vitest';
import { bridgeTransport, type NetIn, type NetOut, ownBuffer, type PortLike, PortTransport } from './port-transport.ts';

/** A Transport double for the main thread's mesh: records sends, emits what the test says. */
class FakeMesh implements Transport {
  readonly emitter = new TransportEmitter();
  readonly up = new Set<PeerId>();
  readonly sent: { to: PeerId; bytes: Uint8Array }[] = [];
  constructor(readonly self: PeerId) {}
  peers() {
    return [...this.up];
  }
  async send(to: PeerId, bytes: Uint8Array) {
    if (!this.up.has(to)) throw new TransportError('peer-not-up', `${to} is down`);
    this.sent.push({ to, bytes });
  }
  on: Transport['on'] = (event, listener) => this.emitter.on(event, listener);
  async close() {}
}

const asPort = <In, Out>(port: MessagePort) => {
  port.start();
  return port as unknown as PortLike<In, Out>;
};
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

function pair() {
  const { port1, port2 } = new MessageChannel();
  const mesh = new FakeMesh('main');
  mesh.up.add('a');
  const detach = bridgeTransport(mesh, asPort<NetOut, NetIn>(port1));
  const workerPort = asPort<NetIn, NetOut>(port2);
  const transport = new PortTransport('main', workerPort);
  workerPort.addEventListener('message', (event) => transport.receive(event.data));
  const close = () => {
    port1.close();
    port2.close();
  };
  return { mesh, transport, detach, close };
}

describe('PortTransport ⇄ bridgeTransport', () => {
  it('holds events until start(), then delivers peers and messages in order', async () => {
    const { mesh, transport, close } = pair();
    const seen: string[] = [];
    mesh.up.add('b');
    mesh.emitter.emit('peer-up', 'b');
    mesh.emitter.emit('message', 'b', new Uint8Array([1, 2, 3]));
    await tick();
    transport.on('peer-up', (peer) => seen.push(`up ${peer}`));
    transport.on('message', (from, bytes) => seen.push(`msg ${from} ${[...bytes]}`));
    expect(seen).toEqual([]);
    transport.start();
    expect(seen).toEqual(['up a', 'up b', 'msg b 1,2,3']);
    expect(transport.peers().sort()).toEqual(['a', 'b']);
    close();
  });

  it('sends reach the mesh as copies; the caller keeps its buffer; errors come back typed', async () => {
    const { mesh, transport, close } = pair();
    transport.start();
    await tick();
    const bytes = new Uint8Array([9, 8, 7]);
    await transport.send('a', bytes);
    expect([...bytes]).toEqual([9, 8, 7]); // not detached: one encoding may go to several peers
    expect(mesh.sent.map((s) => [s.to, [...s.bytes]])).toEqual([['a', [9, 8, 7]]]);
    await expect(transport.send('nobody', bytes)).rejects.toMatchObject({ code: 'peer-not-up' });
    mesh.up.add('c');
    mesh.emitter.emit('peer-up', 'c');
    await tick();
    mesh.up.delete('c'); // down on the main thread before the worker heard of it
    await expect(transport.send('c', bytes)).rejects.toMatchObject({ code: 'peer-not-up' });
    close();
  });

  it('peer-down removes the peer; close rejects pending sends and later ones', async () => {
    const { mesh, transport, close } = pair();
    transport.start();
    await tick();
    const downs: string[] = [];
    transport.on('peer-down', (peer, reason) => downs.push(`${peer} ${reason.code}`));
    mesh.up.delete('a');
    mesh.emitter.emit('peer-down', 'a', { code: 'left', message: 'bye' });
    await tick();
    expect(downs).toEqual(['a left']);
    expect(transport.peers()).toEqual([]);
    await transport.close();
    await expect(transport.send('a', new Uint8Array(1))).rejects.toMatchObject({ code: 'closed' });
    close();
  });

  it('carries the page’s key pair and the server’s bindings to the worker, in order with the mesh; a Member there signs and verifies with them', async () => {
    const RUN = 11;
    const codec = await createWireCodec();
    const [page, peerA, peerB, impostor] = await Promise.all([
      createIdentity({ algorithm: 'ECDSA-P256' }),
      createIdentity(),
      createIdentity(),
      createIdentity(),
    ]);
    const peerKeys = new PeerKeyRegistry();
    peerKeys.bind('a', peerA.key);
    const { port1, port2 } = new MessageChannel();
    const mesh = Object.assign(new FakeMesh('main'), { identity: page, peerKeys });
    mesh.up.add('a');
    bridgeTransport(mesh, asPort<NetOut, NetIn>(port1));
    // b is bound before it comes up, as the signaling client does before its peer-joined event
    peerKeys.bind('b', peerB.key);
    mesh.up.add('b');
    mesh.emitter.emit('peer-up', 'b');
    const workerPort = asPort<NetIn, NetOut>(port2);
    const transport = new PortTransport('main', workerPort);
    workerPort.addEventListener('message', (event) => transport.receive(event.data));
    await tick();
    const member = new Member(transport, codec, wallClock, RUN);
    transport.start();
    expect(member.identity?.key).toEqual(page.key);
    expect(transport.peerKeys.entries()).toEqual([
      ['a', peerA.key],
      ['b', peerB.key],
    ]);

    // signed with the page's key, as the others know it from the server
    await member.send('a', SAMPLES['hash-report']);
    await tick();
    const decoded = codec.decode(mesh.sent[0]?.bytes ?? new Uint8Array());
    if (!decoded.ok || decoded.message.kind !== 'hash-report') throw new Error('a hash report on the mesh');
    const claim = await signedBytesOf(RUN, 'main', SAMPLES['hash-report']);
    expect(await verifySignature(page.key, claim, decoded.message.signature ?? '')).toBe(true);

    // verified with b's bound key: b's own report is taken, one signed by another key refused
    const reports: PeerId[] = [];
    member.on('hash-report', (from) => reports.push(from));
    const fromB = await signedBytesOf(RUN, 'b', SAMPLES['hash-report']);
    for (const signer of [peerB, impostor]) {
      const bytes = codec.encode({ ...SAMPLES['hash-report'], signature: await signer.sign(fromB) }, RUN);
      mesh.emitter.emit('message', 'b', bytes);
    }
    await tick();
    expect(reports).toEqual(['b']);
    expect(member.counters.byReason()).toEqual({ signature: 1 });

    // b leaves: its binding goes with it
    peerKeys.unbind('b');
    await tick();
    expect(transport.peerKeys.get('b')).toBeUndefined();
    port1.close();
    port2.close();
  });

  it('ownBuffer copies only views into larger buffers', () => {
    const whole = new Uint8Array([1, 2]);
    expect(ownBuffer(whole)).toBe(whole);
    const view = new Uint8Array(8).subarray(2, 4);
    const own = ownBuffer(view);
    expect(own).not.toBe(view);
    expect(own.buffer.byteLength).toBe(2);
  });
});

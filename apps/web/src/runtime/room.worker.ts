/// <reference lib="webworker" />
/**
 * The room worker: one dedicated Web Worker per page that runs the swarm member (host or
 * volunteer). The main thread sends `host` or `volunteer` first, then `net` traffic and
 * controls; everything here is off the UI thread.
 */
import { startHost } from './host-runtime.ts';
import type { RuntimeControl, RuntimeIn, RuntimeOut } from './messages.ts';
import { type NetIn, type NetOut, type PortLike, PortTransport } from './port-transport.ts';
import { startVolunteer } from './volunteer-runtime.ts';

declare const self: DedicatedWorkerGlobalScope;

const post = (message: RuntimeOut, transfer: Transferable[] = []) => self.postMessage(message, transfer);
const fail = (error: unknown) =>
  post({ type: 'error', message: error instanceof Error ? error.message : String(error), fatal: true });

let transport: PortTransport | null = null;
let runtime: { handle(message: RuntimeControl): void } | null = null;
/** Controls that came while the runtime was starting. */
const held: RuntimeControl[] = [];
/** Mesh traffic that came before the host or volunteer message: the bridge posts the key pair and bindings at once. */
const early: NetIn[] = [];

self.addEventListener('message', (event: MessageEvent<RuntimeIn>) => {
  const message = event.data;
  if ('net' in message) {
    if (transport) transport.receive(message);
    else early.push(message);
    return;
  }
  switch (message.type) {
    case 'host':
    case 'volunteer': {
      if (transport) return fail('the room worker was started twice');
      // The transport exists at once, so no mesh event is lost while the runtime starts (it queues them).
      transport = new PortTransport(message.self, self as unknown as PortLike<NetIn, NetOut>);
      for (const net of early.splice(0)) transport.receive(net);
      const started =
        message.type === 'host' ? startHost(message, transport, post) : startVolunteer(message, transport, post);
      started.then((ready) => {
        runtime = ready;
        for (const control of held.splice(0)) ready.handle(control);
      }, fail);
      return;
    }
    default:
      if (runtime) runtime.handle(message);
      else held.push(message);
  }
});

self.addEventListener('unhandledrejection', (event) => {
  post({ type: 'error', message: `unhandled: ${String(event.reason?.message ?? event.reason)}`, fatal: false });
});

/** Shared by the simulator's tests: a network on a fresh clock, and an event recorder. */
import { VirtualClock } from './clock.ts';
import { SimNetwork, type SimNetworkOptions } from './network.ts';
import type { SimTransport } from './sim-transport.ts';

export function simNetwork(options: SimNetworkOptions = {}): { clock: VirtualClock; network: SimNetwork } {
  const clock = new VirtualClock();
  return { clock, network: new SimNetwork(clock, options) };
}

/** A message of `size` bytes whose first byte is `tag`. */
export function message(size: number, tag = 0): Uint8Array {
  const bytes = new Uint8Array(size);
  if (size > 0) bytes[0] = tag;
  return bytes;
}

/** Appends every event `transport` sees to `log`, as `time self: what`. */
export function record(clock: VirtualClock, transport: SimTransport, log: string[]): void {
  const at = () => `${clock.now()} ${transport.self}`;
  transport.on('message', (from, bytes) => log.push(`${at()}: #${bytes[0]}/${bytes.length} from ${from}`));
  transport.on('peer-up', (peer) => log.push(`${at()}: up ${peer}`));
  transport.on('peer-down', (peer, reason) => log.push(`${at()}: down ${peer} ${reason.code}`));
}

/** Records when a send settles, as `time ok` or `time code`. */
export function outcome(clock: VirtualClock, sent: Promise<void>, log: string[]): void {
  sent.then(
    () => log.push(`${clock.now()} ok`),
    (error: { code?: string }) => log.push(`${clock.now()} ${error.code}`),
  );
}

/**
 * What every swarm role shares: a Transport, the wire codec, a receiver that validates and counts
 * every incoming message, byte counters, and delivery to self (a worker that owns a shard sends
 * its own contribution to itself; the coordinator is also a replica). Handlers see decoded,
 * schema-checked messages only; a handler that throws is a bug, logged and counted, never fatal.
 */
import type { Message, MessageKind, MessageOf, PeerId, Transport, WireCodec } from '@shoal/protocol';
import { MessageReceiver, RejectionCounters, TransportError } from '@shoal/protocol';

/** Time as the swarm sees it: virtual in the simulator, the wall clock on a real mesh. */
export interface SwarmClock {
  now(): number;
  sleep(ms: number): Promise<void>;
  /** Calls `callback` after `ms`; returns a function that cancels it. */
  setTimer(ms: number, callback: () => void): () => void;
  /**
   * Real work awaited inside swarm code (an engine step, WebAssembly start-up): the simulator's
   * clock holds virtual time still until it settles, so runs stay deterministic.
   */
  track<T>(work: PromiseLike<T>): Promise<T>;
}

/** The wall clock, for real meshes. */
export const wallClock: SwarmClock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  setTimer(ms, callback) {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
  track: (work) => Promise.resolve(work),
};

export type Handler<K extends MessageKind> = (from: PeerId, message: MessageOf<K>) => void;

export class Member {
  readonly counters = new RejectionCounters();
  readonly receiver: MessageReceiver;
  bytesSent = 0;
  bytesReceived = 0;
  /** Messages whose send failed (the peer went down): the round logic copes with the loss. */
  sendFailures = 0;
  private readonly handlers = new Map<MessageKind, Handler<MessageKind>[]>();
  private readonly unsubscribe: (() => void)[] = [];
  private closed = false;

  constructor(
    readonly transport: Transport,
    readonly codec: WireCodec,
    readonly clock: SwarmClock,
    public runId: number,
  ) {
    this.receiver = new MessageReceiver(codec, { counters: this.counters, runId: runId === 0 ? undefined : runId });
    this.unsubscribe.push(
      transport.on('message', (from, bytes) => {
        this.bytesReceived += bytes.byteLength;
        const message = this.receiver.receive(from, bytes);
        if (message) this.dispatch(from, message);
      }),
    );
  }

  get self(): PeerId {
    return this.transport.self;
  }

  /** Calls `handler` with each `kind` message; returns a function that stops it. */
  on<K extends MessageKind>(kind: K, handler: Handler<K>): () => void {
    const list = this.handlers.get(kind) ?? [];
    const entry = handler as unknown as Handler<MessageKind>;
    list.push(entry);
    this.handlers.set(kind, list);
    return () => {
      const index = list.indexOf(entry);
      if (index >= 0) list.splice(index, 1);
    };
  }

  onPeerDown(listener: (peer: PeerId, reason: string) => void): void {
    this.unsubscribe.push(this.transport.on('peer-down', (peer, reason) => listener(peer, reason.code)));
  }

  onPeerUp(listener: (peer: PeerId) => void): void {
    this.unsubscribe.push(this.transport.on('peer-up', listener));
  }

  /** Resolves once `peer` is up (at once if it already is). */
  waitForPeer(peer: PeerId): Promise<void> {
    if (peer === this.self || this.transport.peers().includes(peer)) return Promise.resolve();
    return new Promise((resolve) => {
      const off = this.transport.on('peer-up', (up) => {
        if (up !== peer) return;
        off();
        resolve();
      });
    });
  }

  /** Sends one message; to self it is delivered on a later microtask, without the wire. */
  async send(to: PeerId, message: Message): Promise<void> {
    if (this.closed) return;
    if (to === this.self) {
      queueMicrotask(() => this.dispatch(to, message));
      return;
    }
    try {
      const bytes = this.codec.encode(message, this.runId);
      await this.transport.send(to, bytes);
      this.bytesSent += bytes.byteLength;
    } catch (error) {
      this.sendFailed(message, error);
    }
  }

  /**
   * A peer that went down is an expected loss (the round logic copes); anything else is a bug in
   * a transport, counted under 'send-error' rather than left to become an unhandled rejection.
   */
  private sendFailed(message: Message, error: unknown): void {
    this.sendFailures++;
    if (!(error instanceof TransportError)) {
      // An encode error is a bug on this side (a message that would not validate): say it once.
      if (this.counters.total('send-error') === 0) console.error(`shoal: could not send ${message.kind}:`, error);
      this.receiver.reject(this.self, 'send-error', String((error as Error)?.message ?? error), message.kind);
    }
  }

  /** The same message to several peers (encoded once). */
  async broadcast(peers: Iterable<PeerId>, message: Message): Promise<void> {
    let bytes: Uint8Array | null = null;
    const sends: Promise<void>[] = [];
    for (const peer of new Set(peers)) {
      if (peer === this.self) {
        sends.push(this.send(peer, message));
        continue;
      }
      try {
        bytes ??= this.codec.encode(message, this.runId);
      } catch (error) {
        this.sendFailed(message, error);
        return;
      }
      const encoded = bytes;
      sends.push(
        this.transport.send(peer, encoded).then(
          () => {
            this.bytesSent += encoded.byteLength;
          },
          (error) => this.sendFailed(message, error),
        ),
      );
    }
    await Promise.all(sends);
  }

  /** Counts a message refused above the wire (stale round, wrong role). */
  refuse(from: PeerId, kind: MessageKind, reason: string, detail: string): void {
    this.receiver.reject(from, reason, detail, kind);
  }

  /** Refuses a message (counted as by refuse) and tells its sender why with a `rejected`. */
  rejectBack(
    from: PeerId,
    kind: MessageKind,
    reason: string,
    detail: string,
    about: { fragment?: number; round?: number; shard?: number } = {},
  ): void {
    this.refuse(from, kind, reason, detail);
    void this.send(from, { kind: 'rejected', about: kind, reason, message: detail, ...about });
  }

  setRun(runId: number): void {
    this.runId = runId;
    this.receiver.runId = runId;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const off of this.unsubscribe) off();
    await this.transport.close();
  }

  private dispatch(from: PeerId, message: Message): void {
    for (const handler of this.handlers.get(message.kind) ?? []) {
      try {
        handler(from, message as never);
      } catch (error) {
        this.receiver.reject(from, 'handler-error', String((error as Error)?.stack ?? error), message.kind);
      }
    }
  }
}

/**
 * What every swarm role shares: a Transport, the wire codec, a receiver that validates and counts
 * every incoming message, byte counters, and delivery to self (a worker that owns a shard sends
 * its own contribution to itself; the coordinator is also a replica). Handlers see decoded,
 * schema-checked messages only; a handler that throws is a bug, logged and counted, never fatal.
 *
 * Signatures (protocol identity.ts): a member with an identity signs the contributions, shard
 * results and hash reports it sends to others, and puts its key in its hello. It dispatches those
 * kinds only when they verify with the key the signaling server bound to the sender (`peerKeys`);
 * from a peer without a key, unsigned, or with a key this runtime cannot check, they are refused
 * as 'signature', counted, and answered with a `rejected` (requireSignatures, on unless a test
 * room without key pairs turns it off). WebCrypto is asynchronous, so a peer's messages wait
 * behind its message being verified (and its peer-down behind them), and sends wait behind a
 * signature being made: both directions keep their order.
 * In the simulator the WebCrypto work is tracked by the clock, so runs stay deterministic. Kinds
 * that are not signed are dispatched synchronously when nothing of their sender waits ahead.
 */
import {
  HEADER_OFFSETS,
  type Identity,
  isSignedMessage,
  type KeyedTransport,
  type Message,
  type MessageKind,
  type MessageOf,
  MessageReceiver,
  type PeerId,
  PeerKeyRegistry,
  RejectionCounters,
  type SignatureCheck,
  signedBytesOf,
  type Transport,
  TransportError,
  type WireCodec,
} from '@shoal/protocol';

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

export interface MemberOptions {
  /**
   * This member's key pair: what it signs with and announces in its hello. Default: the
   * transport's (a room mesh carries the one its signaling client announced), else none.
   */
  identity?: Identity | null;
  /** The peers' keys as the signaling server bound them. Default: the transport's, else empty. */
  peerKeys?: PeerKeyRegistry;
  /**
   * Refuse a contribution, shard result or hash report that does not verify: from a peer without
   * a key, unsigned, signed with another key, or signed with a key this runtime cannot check.
   * Default true, in every room Shoal makes (CLI, pages, simulator, attack room): a volunteer
   * cannot opt out by announcing no key. Only test rooms without key pairs (test-room.ts,
   * `identities: 'none'`) turn it off.
   */
  requireSignatures?: boolean;
  /**
   * SHA-256 of a signed message's payload (sha256Hex by default): the simulator's members, all in
   * one process, share one that hashes each payload's bytes once (sim/shared-crypto.ts).
   */
  payloadDigest?: (bytes: Uint8Array<ArrayBuffer>) => Promise<string>;
}

const SETTLED = Promise.resolve();

/** The round coordinates `message` names, for the `rejected` that answers it. */
function aboutOf(message: Message): { fragment?: number; round?: number; shard?: number } {
  const { fragment, round, shard } = message as { fragment?: number; round?: number; shard?: number };
  return {
    ...(fragment !== undefined && { fragment }),
    ...(round !== undefined && { round }),
    ...(shard !== undefined && { shard }),
  };
}

/** A message that could not be signed (WebCrypto failed): counted like a send that failed. */
interface Unsigned {
  unsigned: Message;
  error: Error;
}

export class Member {
  readonly counters = new RejectionCounters();
  readonly receiver: MessageReceiver;
  bytesSent = 0;
  bytesReceived = 0;
  /** Messages whose send failed (the peer went down): the round logic copes with the loss. */
  sendFailures = 0;
  /** Signed messages from peers whose key this runtime's WebCrypto cannot use, dispatched unverified. */
  unverifiedMessages = 0;
  private readonly handlers = new Map<MessageKind, Handler<MessageKind>[]>();
  private readonly unsubscribe: (() => void)[] = [];
  private closed = false;
  /** The peers' keys this member verifies with (MemberOptions.peerKeys). */
  readonly peerKeys: PeerKeyRegistry;
  /** Per peer, the settling of its latest message still being verified: later ones wait for it. */
  private readonly inbound = new Map<PeerId, Promise<void>>();
  /** The start of the latest send still waiting for its signature: later sends wait for it. */
  private outgoing: Promise<void> | null = null;

  constructor(
    readonly transport: Transport,
    readonly codec: WireCodec,
    readonly clock: SwarmClock,
    public runId: number,
    private readonly options: MemberOptions = {},
  ) {
    this.receiver = new MessageReceiver(codec, { counters: this.counters, runId: runId === 0 ? undefined : runId });
    this.peerKeys = options.peerKeys ?? (transport as KeyedTransport).peerKeys ?? new PeerKeyRegistry();
    this.unsubscribe.push(
      transport.on('message', (from, bytes) => {
        this.bytesReceived += bytes.byteLength;
        const message = this.receiver.receive(from, bytes);
        if (message) this.admit(from, message, bytes);
      }),
    );
  }

  /** Whether signed kinds must verify (MemberOptions.requireSignatures). */
  get requireSignatures(): boolean {
    return this.options.requireSignatures ?? true;
  }

  /** Read when used, so a transport that learns its identity after this member was made still lends it. */
  get identity(): Identity | null {
    return this.options.identity !== undefined
      ? this.options.identity
      : ((this.transport as KeyedTransport).identity ?? null);
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

  /** A peer went down: told after its messages still being verified have been dispatched or refused. */
  onPeerDown(listener: (peer: PeerId, reason: string) => void): void {
    this.unsubscribe.push(
      this.transport.on('peer-down', (peer, reason) => {
        const behind = this.inbound.get(peer);
        if (behind) void behind.then(() => listener(peer, reason.code));
        else listener(peer, reason.code);
      }),
    );
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

  /** Sends one message; to self it is delivered on a later microtask, without the wire (and unsigned). */
  async send(to: PeerId, message: Message): Promise<void> {
    if (this.closed) return;
    if (to === this.self) {
      queueMicrotask(() => this.dispatch(to, message));
      return;
    }
    await this.inOrder(this.stamped(message), (ready) => this.transmit([to], ready));
  }

  /**
   * Encodes `message` once and hands it to the transport for each of `peers` (none of them self);
   * resolves when every send has settled.
   */
  private async transmit(peers: PeerId[], message: Message): Promise<void> {
    let bytes: Uint8Array;
    try {
      bytes = this.codec.encode(message, this.runId);
    } catch (error) {
      this.sendFailed(message, error);
      return;
    }
    await Promise.all(
      peers.map((peer) =>
        this.transport.send(peer, bytes).then(
          () => {
            this.bytesSent += bytes.byteLength;
          },
          (error) => this.sendFailed(message, error),
        ),
      ),
    );
  }

  /**
   * Runs `start` with `message` at once when nothing is being signed (the transport's own queue
   * keeps the order); otherwise after the sends before it have started and `message` is ready.
   */
  private inOrder(
    message: Message | Promise<Message | Unsigned>,
    start: (message: Message) => Promise<void>,
  ): Promise<void> {
    if (!(message instanceof Promise) && this.outgoing === null) return start(message);
    let sent: Promise<void> = SETTLED;
    const started = (this.outgoing ?? SETTLED)
      .then(() => message)
      .then((ready) => {
        if (this.closed) return;
        if ('unsigned' in ready) this.sendFailed(ready.unsigned, ready.error);
        else sent = start(ready);
      });
    this.outgoing = started;
    void started.then(() => {
      if (this.outgoing === started) this.outgoing = null;
    });
    return started.then(() => sent);
  }

  /**
   * The message as it goes on the wire: a hello with this member's key; a contribution, shard
   * result or hash report signed (a promise: WebCrypto is asynchronous, tracked by the clock).
   */
  private stamped(message: Message): Message | Promise<Message | Unsigned> {
    const identity = this.identity;
    if (!identity) return message;
    if (message.kind === 'hello') return message.key ? message : { ...message, key: identity.key };
    if (!isSignedMessage(message)) return message;
    const signed = message;
    const { runId, self } = this;
    const signing = (async (): Promise<Message | Unsigned> => {
      try {
        const signature = await identity.sign(await signedBytesOf(runId, self, signed, this.options.payloadDigest));
        return { ...signed, signature };
      } catch (error) {
        return { unsigned: signed, error: new Error(`signing failed: ${String(error)}`) };
      }
    })();
    return this.clock.track(signing);
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

  /** The same message to several peers (signed and encoded once). */
  async broadcast(peers: Iterable<PeerId>, message: Message): Promise<void> {
    if (this.closed) return;
    const others: PeerId[] = [];
    const sends: Promise<void>[] = [];
    for (const peer of new Set(peers)) {
      if (peer === this.self) sends.push(this.send(peer, message));
      else others.push(peer);
    }
    if (others.length > 0) sends.push(this.inOrder(this.stamped(message), (ready) => this.transmit(others, ready)));
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

  async close(): Promise<void> {
    this.closed = true;
    for (const off of this.unsubscribe) off();
    await this.transport.close();
  }

  /**
   * Dispatches `message` now when nothing about it needs WebCrypto and nothing from `from` is
   * still being verified; otherwise once its check and every earlier message of `from` have settled.
   */
  private admit(from: PeerId, message: Message, bytes: Uint8Array): void {
    const check = this.checkOf(from, message, bytes);
    const behind = this.inbound.get(from);
    if (!behind && !(check instanceof Promise)) {
      this.settle(from, message, check);
      return;
    }
    const verdict = check instanceof Promise ? this.clock.track(check) : check;
    const settled = (behind ?? SETTLED).then(() => verdict).then((result) => this.settle(from, message, result));
    this.inbound.set(from, settled);
    void settled.then(() => {
      if (this.inbound.get(from) === settled) this.inbound.delete(from);
    });
  }

  /** What must hold of `message` before it is dispatched: null when nothing. */
  private checkOf(from: PeerId, message: Message, bytes: Uint8Array): SignatureCheck | Promise<SignatureCheck> | null {
    if (message.kind === 'hello') return this.checkHello(from, message);
    if (!isSignedMessage(message)) return null;
    const key = this.peerKeys.get(from);
    if (!key) {
      return this.requireSignatures
        ? { verdict: 'invalid', detail: `${from} has no key, and this room requires signatures` }
        : null;
    }
    // signed over the run of the header (a member may accept any run before its welcome)
    const runId = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(HEADER_OFFSETS.runId, true);
    const signed = message;
    const signature = signed.signature;
    return signedBytesOf(runId, from, signed, this.options.payloadDigest).then(
      (claim) => this.peerKeys.check(key, claim, signature),
      (error: unknown): SignatureCheck => ({ verdict: 'invalid', detail: `cannot hash it: ${String(error)}` }),
    );
  }

  /**
   * A hello's key must be the one the server bound to its sender. Of a peer the server said
   * nothing about (an older server, the simulator), the hello's key is taken as its binding.
   */
  private checkHello(from: PeerId, hello: MessageOf<'hello'>): SignatureCheck | null {
    const announced = hello.key;
    if (!announced) return null;
    const bound = this.peerKeys.get(from);
    if (bound === undefined) {
      this.peerKeys.bind(from, announced);
      return null;
    }
    if (bound === null || (bound.algorithm === announced.algorithm && bound.publicKey === announced.publicKey)) {
      return null;
    }
    return { verdict: 'invalid', detail: `its hello announces another key than the one bound to ${from}` };
  }

  private settle(from: PeerId, message: Message, check: SignatureCheck | null): void {
    if (this.closed) return;
    if (check?.verdict === 'invalid') {
      const reason = message.kind === 'hello' ? 'key-mismatch' : 'signature';
      this.rejectBack(from, message.kind, reason, check.detail, aboutOf(message));
      return;
    }
    if (check?.verdict === 'unverifiable') {
      if (this.requireSignatures) {
        this.rejectBack(from, message.kind, 'signature', `${check.detail}, and this room requires signatures`, {
          ...aboutOf(message),
        });
        return;
      }
      this.unverifiedMessages++;
    }
    this.dispatch(from, message);
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

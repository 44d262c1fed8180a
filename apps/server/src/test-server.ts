/**
 * Test support: a server on port 0 with short timers, a raw socket that records every message
 * and close, for the bad-input tests that the typed client would never send, and a valid room view.
 */
import { ROOM_VIEW_VERSION, type RoomViewUpdate } from '@shoal/protocol';
import { RUN_CONFIG } from '@shoal/protocol/test-fixtures';
import type { ServerMessage } from '@shoal/signaling';
import { SignalClient, signalUrl } from '@shoal/signaling';
import { afterEach } from 'vitest';
import { WebSocket } from 'ws';
import { type RunningServer, type ServerOptions, startServer } from './index.ts';

export async function startTestServer(options: Partial<ServerOptions> = {}): Promise<RunningServer> {
  return startServer({ port: 0, host: '127.0.0.1', staticDir: '/nonexistent', logger: null, ...options });
}

/**
 * Typed and raw clients of the test file's current server (`serverOf()`); after each test every
 * client is closed, then the server.
 */
export function testClients(serverOf: () => RunningServer | undefined) {
  const open: { close(): void }[] = [];
  afterEach(async () => {
    for (const client of open.splice(0)) client.close();
    await serverOf()?.close();
  });
  const need = () => {
    const server = serverOf();
    if (!server) throw new Error('start the test server first');
    return server;
  };
  return {
    /** A typed client; `options.identity`: the key pair it announces. */
    async client(options?: Parameters<typeof SignalClient.connect>[2]): Promise<SignalClient> {
      const c = await SignalClient.connect(signalUrl(need().url), WebSocket, options);
      open.push(c);
      return c;
    },
    async raw(options?: Parameters<typeof RawClient.open>[1]): Promise<RawClient> {
      const c = await RawClient.open(need().signalUrl, options);
      open.push(c);
      return c;
    },
  };
}

export class RawClient {
  readonly messages: ServerMessage[] = [];
  closed: { code: number; reason: string } | null = null;

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data, isBinary) => {
      if (!isBinary) this.messages.push(JSON.parse(data.toString()));
    });
    socket.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
    });
    socket.on('error', () => {});
  }

  /**
   * `from`: a loopback address to connect from (all of 127.0.0.0/8 is loopback on Linux), so a
   * test can be several clients on one machine; `headers` go with the upgrade request.
   */
  static open(
    url: string,
    options: { autoPong?: boolean; from?: string; headers?: Record<string, string> } = {},
  ): Promise<RawClient> {
    // a socket bound to 127.0.0.x cannot reach ::1, which `localhost` may resolve to
    const target = options.from ? url.replace('//localhost:', '//127.0.0.1:') : url;
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(target, {
        autoPong: options.autoPong ?? true,
        localAddress: options.from,
        headers: options.headers,
      });
      socket.once('open', () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  send(message: unknown): void {
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The first message of this kind not yet taken, waiting up to `ms`. */
  async next<K extends ServerMessage['kind']>(kind: K, ms = 2000): Promise<Extract<ServerMessage, { kind: K }>> {
    const deadline = Date.now() + ms;
    for (;;) {
      const index = this.messages.findIndex((message) => message.kind === kind);
      if (index >= 0) return this.messages.splice(index, 1)[0] as Extract<ServerMessage, { kind: K }>;
      if (Date.now() > deadline) {
        throw new Error(`no ${kind} within ${ms} ms; got ${JSON.stringify(this.messages).slice(0, 500)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  async error(ms?: number): Promise<string> {
    return (await this.next('error', ms)).code;
  }

  /** The kind of the first message not yet taken (an error's code instead), waiting up to `ms`. */
  async outcome(ms = 2000): Promise<string> {
    await until(() => this.messages.length > 0, ms);
    const first = this.messages.shift() as ServerMessage;
    return first.kind === 'error' ? first.code : first.kind;
  }

  async closedWith(ms = 2000): Promise<number> {
    const deadline = Date.now() + ms;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error(`not closed within ${ms} ms`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return this.closed.code;
  }

  close(): void {
    this.socket.terminate();
  }
}

export const until = async (check: () => boolean, ms = 2000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

/** A valid room view of `roomId` (nano-like config, no peers) with chart points at times `ts`. */
export function roomView(roomId: string, ts: number[], extra: Partial<RoomViewUpdate> = {}): RoomViewUpdate {
  return {
    version: ROOM_VIEW_VERSION,
    roomId,
    status: 'running',
    config: RUN_CONFIG,
    startedAt: 1_700_000_000_000,
    hostKind: 'cli',
    metrics: {
      step: ts.length,
      tokens: 1024 * ts.length,
      trainLoss: 3,
      evalLoss: null,
      tokensPerSecond: 500,
      bytesSent: 10,
      bytesReceived: 20,
      roundsCommitted: 0,
      roundsAborted: 0,
      fragments: [
        { round: 0, hash: '09ec977e1bb6675ae57c224cecd0ca9e' },
        { round: 0, hash: '09ec977e1bb6675ae57c224cecd0ca9e' },
      ],
    },
    peers: [],
    rounds: [],
    points: ts.map((t) => ({
      t,
      tokens: t,
      step: Math.floor(t / 100),
      trainLoss: 3,
      evalLoss: null,
      tokensPerSecond: 500,
      bytes: t,
      fp32Bytes: 0,
      dpBytes: 0,
      peers: { w0: { loss: 3, tokensPerSecond: 500 } },
    })),
    ...extra,
  };
}

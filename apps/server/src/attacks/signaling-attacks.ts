/**
 * Attacks on signaling, each by a token holder
 * (or the host) against a fresh `shoal server` on loopback with its real limits: churning
 * membership after a restart to strand the members, flooding slow receivers with signals to get
 * them closed, announcing a new key on rejoin, guessing tokens with `check`, and sending a host's
 * oversized frames that are not a publish. Each measures what its victims kept (their seats, their
 * sockets, their key binding) or what the server spent, never what it assumes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdentity } from '@shoal/protocol';
import type { ServerMessage, ServerMessageOf } from '@shoal/signaling';
import { WebSocket } from 'ws';
import { type RunningServer, type ServerOptions, startServer } from '../index.ts';
import { DEFAULT_SIGNALING_LIMITS, membersRemembered, type SignalingLimits } from '../signal-config.ts';
import type { ServerAttack, ServerAttackOutcome } from './types.ts';

/** A server on loopback (a fresh port unless `port`), silent, no web app. */
function serve(options: Partial<ServerOptions> = {}): Promise<RunningServer> {
  return startServer({ port: 0, host: '127.0.0.1', staticDir: '/nonexistent', logger: null, ...options });
}

/** A fresh rooms directory for `use`, removed afterwards whatever happens. */
async function withRoomsDir<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-signal-attack-'));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
}

/** Runs `attack` on `server` and closes it (and every peer opened on it) whatever happens. */
async function onServer<T>(server: RunningServer, attack: (peers: Peers) => Promise<T>): Promise<T> {
  const peers = new Peers(server);
  try {
    return await attack(peers);
  } finally {
    peers.closeAll();
    await server.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}

/** A raw signaling socket that records what the server sends it and how it closed. */
class Peer {
  readonly messages: ServerMessage[] = [];
  closed: number | null = null;

  constructor(readonly socket: WebSocket) {
    socket.on('message', (data, isBinary) => {
      if (!isBinary) this.messages.push(JSON.parse(data.toString()));
    });
    socket.on('close', (code) => {
      this.closed = code;
    });
    socket.on('error', () => {});
  }

  send(message: unknown): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  /** The first message of `kind` not yet taken (null after `ms`). */
  async next<K extends ServerMessage['kind']>(kind: K, ms = 3_000): Promise<ServerMessageOf<K> | null> {
    let index = -1;
    await until(() => {
      index = this.messages.findIndex((message) => message.kind === kind);
      return index >= 0;
    }, ms);
    return index >= 0 ? (this.messages.splice(index, 1)[0] as ServerMessageOf<K>) : null;
  }

  /** The first message's kind (an error's code instead), or 'nothing' after `ms`. */
  async outcome(ms = 3_000): Promise<string> {
    if (!(await until(() => this.messages.length > 0, ms))) return 'nothing';
    const first = this.messages.shift() as ServerMessage;
    return first.kind === 'error' ? first.code : first.kind;
  }

  errorCodes(): string[] {
    return this.messages.flatMap((message) => (message.kind === 'error' ? [message.code] : []));
  }
}

/** The peers an attack opens on one server, all closed with it. */
class Peers {
  private readonly open: Peer[] = [];

  constructor(private readonly server: RunningServer) {}

  async peer(): Promise<Peer> {
    const socket = new WebSocket(this.server.signalUrl);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const peer = new Peer(socket);
    this.open.push(peer);
    return peer;
  }

  /** A host in a new room: its socket and the room's credentials. */
  async host(key?: unknown): Promise<{ host: Peer; created: ServerMessageOf<'created'> }> {
    const host = await this.peer();
    host.send({ kind: 'create', version: 1, ...(key ? { key } : {}) });
    const created = await host.next('created');
    if (!created) throw new Error('the server did not create a room');
    return { host, created };
  }

  /** A member that joins `created`'s room: its socket and its `joined` (null: refused, see outcome). */
  async member(
    created: ServerMessageOf<'created'>,
    key?: unknown,
  ): Promise<{ peer: Peer; joined: ServerMessageOf<'joined'> }> {
    const peer = await this.peer();
    peer.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken, ...(key ? { key } : {}) });
    const joined = await peer.next('joined');
    if (!joined) throw new Error(`the server did not seat a member: ${peer.errorCodes().join(', ')}`);
    return { peer, joined };
  }

  /** What a rejoin as `joined`'s member gets ('joined' or the refusal's code), on a new socket kept open. */
  async rejoin(joined: ServerMessageOf<'joined'>, key?: unknown): Promise<string> {
    const peer = await this.peer();
    const { roomId, peerId, memberSecret } = joined;
    peer.send({ kind: 'rejoin', version: 1, roomId, peerId, memberSecret, ...(key ? { key } : {}) });
    return peer.outcome();
  }

  closeAll(): void {
    for (const peer of this.open.splice(0)) peer.socket.terminate();
  }
}

/** How many of `codes` are each code, as `code ×n` joined by commas. */
function tally(codes: string[]): string {
  const counts = new Map<string, number>();
  for (const code of codes) counts.set(code, (counts.get(code) ?? 0) + 1);
  return [...counts].map(([code, n]) => `${code} ×${n}`).join(', ');
}

const CHURN_BATCH = 20;

/**
 * Three members join, the server restarts (everyone is absent), then the attacker joins and drops
 * `cycles` times: what the cycles got, and whether every member took its seat back as itself.
 */
async function churnAfterRestart(limits: Partial<SignalingLimits>, cycles: number) {
  return withRoomsDir(async (dir) => {
    const first = await serve({ roomsDir: dir, limits, viewSaveIntervalMs: 10 });
    const { created, members } = await onServer(first, async (peers) => {
      const { created } = await peers.host();
      const members: ServerMessageOf<'joined'>[] = [];
      for (let i = 0; i < 3; i++) members.push((await peers.member(created)).joined);
      return { created, members };
    });
    const second = await serve({ roomsDir: dir, limits, viewSaveIntervalMs: 10, port: first.port });
    return onServer(second, async (peers) => {
      const startedAt = Date.now();
      const outcomes: string[] = [];
      const cycle = async () => {
        const churner = await peers.peer();
        churner.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
        outcomes.push(await churner.outcome());
        churner.socket.terminate();
      };
      // 20 at a time, as fast as the loopback takes them
      for (let done = 0; done < cycles; done += CHURN_BATCH) {
        await Promise.all(Array.from({ length: Math.min(CHURN_BATCH, cycles - done) }, cycle));
      }
      const churnMs = Date.now() - startedAt;
      const rejoins: string[] = [];
      for (const member of members) rejoins.push(await peers.rejoin(member));
      return { outcomes, churnMs, rejoins, stats: second.signalingStats() };
    });
  });
}

const churnEvictAfterRestart: ServerAttack = {
  name: 'churn-evict-after-restart',
  family: 'signaling',
  summary:
    'right after a restart (every member absent) a token holder joins and drops 260 times, to evict the absent members so their rejoins fail',
  async run(): Promise<ServerAttackOutcome> {
    // as the server runs, then with join pacing lifted so that only the room's memory of members holds
    const paced = await churnAfterRestart({}, 260);
    const unpaced = await churnAfterRestart(
      { joinsPerMinutePerIp: 1e6, joinBurstPerIp: 1e6, joinsPerMinutePerRoom: 1e6, joinBurstPerRoom: 1e6 },
      260,
    );
    const rejoined = [...paced.rejoins, ...unpaced.rejoins].filter((outcome) => outcome === 'joined').length;
    const refused = [...paced.outcomes, ...unpaced.outcomes].filter((outcome) => outcome !== 'joined');
    const remembered = membersRemembered(DEFAULT_SIGNALING_LIMITS);
    return {
      stopped: rejoined === 6,
      detected: refused.length > 0,
      refusals: refused.length,
      detail:
        `${rejoined}/6 members rejoined as themselves; paced: 260 cycles in ${paced.churnMs} ms got ${tally(paced.outcomes)}; ` +
        `join pacing lifted: ${tally(unpaced.outcomes)} (the room remembers at most ${remembered} members)`,
    };
  },
};

const slowReceiverSignalFlood: ServerAttack = {
  name: 'slow-receiver-signal-flood',
  family: 'signaling',
  summary:
    'a member sends 190 signals of 60 KB (11.4 MB) to the host and a member whose sockets are slow for 2 s, to get them closed',
  async run(): Promise<ServerAttackOutcome> {
    const server = await serve();
    return onServer(server, async (peers) => {
      const { host, created } = await peers.host();
      const victim = await peers.member(created);
      const attacker = await peers.member(created);
      host.socket.pause();
      victim.peer.socket.pause();
      const data = 'x'.repeat(60_000);
      const targets = [created.peerId, victim.joined.peerId];
      for (let i = 0; i < 190; i++) attacker.peer.send({ kind: 'signal', to: targets[i % 2], data });
      await sleep(2_000);
      host.socket.resume();
      victim.peer.socket.resume();
      // reading again, the victims are still connected, and signal each other
      victim.peer.send({ kind: 'signal', to: created.peerId, data: { sdp: 'still here' } });
      const flows = await until(
        () =>
          host.messages.some(
            (m) => m.kind === 'signal' && m.from === victim.joined.peerId && typeof m.data === 'object',
          ),
        5_000,
      );
      const fromAttacker = [host, victim.peer].reduce(
        (sum, peer) =>
          sum + peer.messages.filter((m) => m.kind === 'signal' && m.from === attacker.joined.peerId).length,
        0,
      );
      const { rejections } = server.signalingStats();
      const dropped = (rejections['signal-budget'] ?? 0) + (rejections['receiver-busy'] ?? 0);
      const closed = [host.closed, victim.peer.closed].filter((code) => code !== null);
      return {
        stopped: closed.length === 0 && flows,
        detected: attacker.peer.errorCodes().some((code) => code === 'signal-budget' || code === 'receiver-busy'),
        refusals: dropped,
        detail:
          `victims closed: ${closed.length ? closed.join(', ') : 'none'}; their signal flows after: ${flows}; ` +
          `of 190 frames ${fromAttacker} delivered, ${dropped} dropped (${tally(attacker.peer.errorCodes())} told to the sender); ` +
          `attacker still connected: ${attacker.peer.closed === null}`,
      };
    });
  },
};

const CHECK_SOCKETS = 20;
const CHECKS_PER_SOCKET = 150;

const checkTokenFlood: ServerAttack = {
  name: 'check-token-flood',
  family: 'signaling',
  summary: `one address sends ${CHECK_SOCKETS * CHECKS_PER_SOCKET} checks with wrong tokens from ${CHECK_SOCKETS} sockets at once`,
  async run(): Promise<ServerAttackOutcome> {
    const server = await serve();
    return onServer(server, async (peers) => {
      const { created } = await peers.host();
      const guessers = await Promise.all(Array.from({ length: CHECK_SOCKETS }, () => peers.peer()));
      const startedAt = Date.now();
      for (const guesser of guessers) {
        for (let i = 0; i < CHECKS_PER_SOCKET; i++) {
          guesser.send({ kind: 'check', version: 1, roomId: created.roomId, token: `guess${i}x${Date.now()}` });
        }
      }
      const total = CHECK_SOCKETS * CHECKS_PER_SOCKET;
      await until(() => guessers.reduce((sum, g) => sum + g.messages.length, 0) >= total, 8_000);
      const seconds = Math.max(0.001, (Date.now() - startedAt) / 1000);
      const codes = guessers.flatMap((guesser) => guesser.errorCodes());
      const answered = codes.filter((code) => code === 'bad-token').length;
      const { checkBurstPerIp, checksPerMinutePerIp } = DEFAULT_SIGNALING_LIMITS;
      const allowed = checkBurstPerIp + Math.ceil((checksPerMinutePerIp / 60) * seconds) + 1;
      const refusals = codes.filter((code) => code !== 'bad-token').length;
      return {
        stopped: answered <= allowed,
        detected: (server.signalingStats().rejections['check-rate-limited'] ?? 0) > 0,
        refusals,
        detail:
          `${answered} wrong tokens answered of ${total} checks in ${seconds.toFixed(2)} s ` +
          `(${Math.round(answered / seconds)}/s; the budget allows ${allowed}); refused: ${tally(codes.filter((c) => c !== 'bad-token'))}`,
      };
    });
  },
};

const rekeyOnRejoin: ServerAttack = {
  name: 'rekey-on-rejoin',
  family: 'signaling',
  summary: 'a member drops and rejoins with its own member secret announcing a new key (and then none) for its peer id',
  async run(): Promise<ServerAttackOutcome> {
    const [hostKeys, oldKeys, newKeys] = await Promise.all([createIdentity(), createIdentity(), createIdentity()]);
    const server = await serve();
    return onServer(server, async (peers) => {
      const { host, created } = await peers.host(hostKeys.key);
      const { peer, joined } = await peers.member(created, oldKeys.key);
      peer.socket.terminate();
      await until(() => server.signalingStats().peers === 1, 3_000);
      const rekeyed = await peers.rejoin(joined, newKeys.key);
      const unkeyed = await peers.rejoin(joined);
      // what the host was told of the member's key while it was back, if it got back
      const announced = host.messages.flatMap((m) =>
        m.kind === 'peer-joined' && m.peer === joined.peerId && m.key ? [m.key.publicKey] : [],
      );
      const newKeyBound = announced.includes(newKeys.key.publicKey);
      const honest = await peers.rejoin(joined, oldKeys.key);
      const refusals = [rekeyed, unkeyed].filter((outcome) => outcome !== 'joined').length;
      return {
        stopped: rekeyed === 'key-changed' && unkeyed === 'key-changed' && !newKeyBound && honest === 'joined',
        detected: (server.signalingStats().rejections['key-changed'] ?? 0) >= 2,
        refusals,
        detail: `rejoin with a new key: ${rekeyed}; with none: ${unkeyed}; the host was told the new key: ${newKeyBound}; with its own key: ${honest}`,
      };
    });
  },
};

const OVERSIZED_FRAMES = 150;
const OVERSIZED_BYTES = 255 * 1024;

const hostOversizedFrames: ServerAttack = {
  name: 'host-oversized-frames',
  family: 'signaling',
  summary: `a host sends ${OVERSIZED_FRAMES} signal frames of 255 KB (over maxFrameBytes, under maxPublishBytes), to make the server parse them in full`,
  async run(): Promise<ServerAttackOutcome> {
    const server = await serve();
    // every JSON.parse of this process, counted by size: the server's parse of a frame is one of them
    const realParse = JSON.parse;
    let parsedOversized = 0;
    JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
      if (typeof text === 'string' && text.length > DEFAULT_SIGNALING_LIMITS.maxFrameBytes) parsedOversized++;
      return realParse(text, reviver);
    }) as typeof JSON.parse;
    try {
      return await onServer(server, async (peers) => {
        const { host, created } = await peers.host();
        const { peer: member, joined } = await peers.member(created);
        const frame = JSON.stringify({ kind: 'signal', to: joined.peerId, data: 'x'.repeat(OVERSIZED_BYTES - 64) });
        const startedAt = Date.now();
        for (let i = 0; i < OVERSIZED_FRAMES; i++) host.socket.send(frame);
        await until(() => host.errorCodes().length >= OVERSIZED_FRAMES, 8_000);
        const ms = Date.now() - startedAt;
        const codes = host.errorCodes();
        const tooBig = codes.filter((code) => code === 'too-big').length;
        // the host's next small signal still reaches its member
        host.send({ kind: 'signal', to: joined.peerId, data: { sdp: 'after' } });
        const after = await member.next('signal');
        const delivered = (after?.data as { sdp?: string } | undefined)?.sdp === 'after';
        return {
          stopped: parsedOversized === 0 && tooBig === OVERSIZED_FRAMES && delivered && host.closed === null,
          detected: tooBig > 0,
          refusals: tooBig,
          detail:
            `${tooBig}/${OVERSIZED_FRAMES} refused too-big in ${ms} ms; frames over maxFrameBytes parsed: ${parsedOversized}; ` +
            `the host's next signal delivered: ${delivered}`,
        };
      });
    } finally {
      JSON.parse = realParse;
    }
  },
};

export const SIGNALING_ATTACKS: ServerAttack[] = [
  churnEvictAfterRestart,
  slowReceiverSignalFlood,
  rekeyOnRejoin,
  checkTokenFlood,
  hostOversizedFrames,
];

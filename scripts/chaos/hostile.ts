/**
 * The chaos run's hostile volunteer: an ordinary room worker (joinRoomAsWorker) whose
 * outgoing messages are rewritten, dropped or added to, one behaviour at a time, rotating in a
 * seeded order. Nothing inside the swarm knows it is hostile.
 *
 * The rewriting wraps the worker's Member (send and broadcast), before its messages are signed
 * and encoded: a lie then goes out signed with the attacker's own key, as a real attacker's
 * would, and meets the room's checks of content (bounds, checked owners, commit rules) rather than
 * only a signature check. Payload values go through the round's codec (decode, change, encode),
 * as the in-memory attacks do (packages/sim/src/attacks).
 */
import { createCodec } from '@shoal/diloco';
import type { Message, MessageOf, PeerId, RoundOpenMessage } from '@shoal/protocol';
import type { Member } from '@shoal/swarm';
import { shuffled } from './random.ts';

/** The largest magnitude of a 'huge' contribution: finite in fp32 (max ≈ 3.4e38). */
const HUGE_VALUE = 3e38;

type Rewritten = Message | 'drop' | null;

interface Behaviour {
  name: string;
  summary: string;
  /** What becomes of one outgoing message to `to` (null: sent unchanged). */
  rewrite?(message: Message, to: PeerId): Rewritten;
  /** Called at every round-open from the coordinator (forging messages of its own). */
  onOpen?(open: RoundOpenMessage): void;
}

export interface HostileOptions {
  member: Member;
  coordinator: PeerId;
  random: () => number;
  /** Each behaviour lasts this long, then the next one in the seeded order takes over. */
  rotateMs: number;
  /** Only these behaviours (names), in the seeded order; all when omitted. */
  only?: string[];
  log(event: Record<string, unknown>): void;
}

export interface Hostility {
  /** Messages changed, dropped or forged, per behaviour. */
  readonly tampered: Record<string, number>;
  readonly current: string;
  stop(): void;
}

/** A hex string of the same length as `hash`, different in every digit. */
const otherHash = (hash: string) =>
  hash.replace(/[0-9a-f]/g, (digit) => ((Number.parseInt(digit, 16) + 7) % 16).toString(16));

/** Values scaled so that the largest magnitude is HUGE_VALUE (signs and proportions kept). */
function huge(values: Float32Array): Float32Array {
  let max = 0;
  for (const v of values) max = Math.max(max, Math.abs(v));
  return values.map((v) => (max > 0 ? (v * HUGE_VALUE) / max : HUGE_VALUE));
}

/**
 * A contribution's or shard result's payload with its values changed, in the round's codec
 * (`opens`: the rounds open lately, by fragment:round).
 */
function transformPayload<M extends MessageOf<'contribution'> | MessageOf<'shard-result'>>(
  opens: Map<string, RoundOpenMessage>,
  message: M,
  change: (values: Float32Array) => Float32Array,
): M | null {
  const open = opens.get(`${message.fragment}:${message.round}`);
  const range = open?.shards[message.shard];
  if (!open || !range || message.payload.byteLength === 0) return null;
  const codec = createCodec(message.codec, { blockSize: open.blockSize });
  const values = codec.decode(message.payload, range.end - range.start);
  return { ...message, payload: codec.encode(change(values)) };
}

/**
 * Every behaviour of the hostile worker `member` in a room coordinated by `coordinator`: `opens`
 * holds the rounds open lately (by fragment:round), `count` counts a message tampered with.
 */
function behavioursOf(
  member: Member,
  coordinator: PeerId,
  opens: Map<string, RoundOpenMessage>,
  count: (name: string) => void,
): Behaviour[] {
  const transform = <M extends MessageOf<'contribution'> | MessageOf<'shard-result'>>(
    message: M,
    change: (values: Float32Array) => Float32Array,
  ) => transformPayload(opens, message, change);
  const contributions =
    (change: (values: Float32Array) => Float32Array) =>
    (message: Message): Rewritten =>
      message.kind === 'contribution' ? transform(message, change) : null;
  const flipped = (values: Float32Array) => values.map((v) => -v);
  const ownerResults =
    (change: (values: Float32Array) => Float32Array) =>
    (message: Message): Rewritten =>
      message.kind === 'shard-result' && !message.check ? transform(message, change) : null;
  const others = () => member.transport.peers();

  return [
    {
      name: 'contribution-100x',
      summary: 'its contribution ×100',
      rewrite: contributions((values) => values.map((v) => 100 * v)),
    },
    {
      name: 'contribution-minus-10x',
      summary: 'its contribution ×(−10): the sign flipped',
      rewrite: contributions((values) => values.map((v) => -10 * v)),
    },
    { name: 'contribution-huge', summary: 'its contribution scaled to 3e38 (finite)', rewrite: contributions(huge) },
    {
      name: 'result-withheld',
      summary: 'as owner or checker, it sends no shard result',
      rewrite: (message) => (message.kind === 'shard-result' ? 'drop' : null),
    },
    {
      name: 'result-100x',
      summary: 'as owner, its aggregate ×100',
      rewrite: ownerResults((values) => values.map((v) => 100 * v)),
    },
    {
      name: 'result-flipped',
      summary: "as owner, its aggregate's sign flipped",
      rewrite: ownerResults(flipped),
    },
    {
      // Equivocation: owner and checker get its true Δ, the referee (the host, once it takes the
      // shards over) another one, within every bound; the honest aggregators' results then differ
      // from the referee's over the same contributors.
      name: 'equivocate-to-referee',
      summary: 'sends no shard result, so the host referees, and sends the referee its Δ sign-flipped',
      rewrite: (message, to) => {
        if (message.kind === 'shard-result') return 'drop';
        return message.kind === 'contribution' && to === coordinator ? transform(message, flipped) : null;
      },
    },
    {
      name: 'wrong-check-hash',
      summary: 'as checker, a wrong result hash',
      rewrite: (message) =>
        message.kind === 'shard-result' && message.check && message.resultHash
          ? { ...message, resultHash: otherHash(message.resultHash) }
          : null,
    },
    {
      name: 'wrong-hash-report',
      summary: 'a wrong tentative hash in every hash report',
      rewrite: (message) => (message.kind === 'hash-report' ? { ...message, hash: otherHash(message.hash) } : null),
    },
    {
      name: 'forged-commit',
      summary: 'a commit of every round as it opens, naming itself, sent to everyone',
      onOpen(open) {
        const commit: Message = {
          kind: 'commit',
          fragment: open.fragment,
          round: open.round,
          hash: otherHash(open.baseHash),
          contributors: [member.self],
          roomTokens: open.roomTokens,
        };
        count('forged-commit');
        void member.broadcast(others(), commit);
      },
    },
    {
      name: 'forged-abort',
      summary: 'an abort of every round as it opens, sent to everyone',
      onOpen(open) {
        count('forged-abort');
        void member.broadcast(others(), {
          kind: 'abort',
          fragment: open.fragment,
          round: open.round,
          reason: 'deadline',
          message: 'forged by a worker',
        });
      },
    },
  ];
}

export function installHostility(options: HostileOptions): Hostility {
  const { member, coordinator } = options;
  const opens = new Map<string, RoundOpenMessage>();
  const tampered: Record<string, number> = {};
  const count = (name: string) => {
    tampered[name] = (tampered[name] ?? 0) + 1;
  };
  const behaviours = behavioursOf(member, coordinator, opens, count);
  const chosen = options.only ? behaviours.filter((b) => options.only?.includes(b.name)) : behaviours;
  if (chosen.length === 0) throw new Error(`no hostile behaviour named ${options.only?.join(', ')}`);
  const order = shuffled(options.random, chosen);
  let index = 0;
  let current = order[0] as Behaviour;
  options.log({ event: 'behaviour', name: current.name, summary: current.summary });
  const timer = setInterval(() => {
    index = (index + 1) % order.length;
    current = order[index] as Behaviour;
    options.log({ event: 'behaviour', name: current.name, summary: current.summary, tampered: { ...tampered } });
  }, options.rotateMs);

  /** Rewrites outgoing messages with the current behaviour, per recipient; self-deliveries are left alone. */
  const rewrite = (message: Message, to: PeerId): Rewritten => current.rewrite?.(message, to) ?? null;
  const send = member.send.bind(member);
  const broadcast = member.broadcast.bind(member);
  member.send = async (to, message) => {
    if (to === member.self) return send(to, message);
    const out = rewrite(message, to);
    if (out !== null) count(current.name);
    if (out !== 'drop') await send(to, out ?? message);
  };
  member.broadcast = async (peers, message) => {
    const sends: Promise<void>[] = [];
    const unchanged: PeerId[] = [];
    let changed = false;
    for (const peer of new Set(peers)) {
      const out = peer === member.self ? null : rewrite(message, peer);
      if (out === null) unchanged.push(peer);
      else {
        changed = true;
        if (out !== 'drop') sends.push(send(peer, out));
      }
    }
    if (changed) count(current.name);
    if (unchanged.length > 0) sends.push(broadcast(unchanged, message));
    await Promise.all(sends);
  };
  const unsubscribe = member.on('round-open', (from, open) => {
    if (from !== coordinator) return;
    opens.set(`${open.fragment}:${open.round}`, open);
    // keep the last few rounds of each fragment only
    for (const key of opens.keys()) {
      const [fragment, round] = key.split(':').map(Number);
      if (fragment === open.fragment && (round as number) < open.round - 4) opens.delete(key);
    }
    current.onOpen?.(open);
  });

  return {
    tampered,
    get current() {
      return current.name;
    },
    stop() {
      clearInterval(timer);
      unsubscribe();
    },
  };
}

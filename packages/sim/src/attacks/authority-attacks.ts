/**
 * Who may say what: a worker that signs nothing (every room requires signatures), control
 * messages from a peer that does not coordinate, and a commit won by a fake hash. The forged commits name the attacker as the contributor, and it
 * answers state requests with a made-up state (θ = m = 0) under that state's true hash.
 */
import { everyoneBut, servePoisonedState } from './forge.ts';
import type { Attack } from './types.ts';

/** Drops a signed message's signature: what a client that announced no key sends. */
function unsigned<M extends { signature?: string }>(message: M): M {
  const { signature: _, ...rest } = message;
  return rest as M;
}

export const AUTHORITY_ATTACKS: Attack[] = [
  {
    name: 'unsigned-worker',
    family: 'authority',
    summary: 'a worker announces no key and signs nothing it sends: contributions, shard results, hash reports',
    install(context, hostile) {
      let keyless = false;
      // from the start on, the server's binding says it announced none (it rejoined without one)
      context.every(1_000, () => {
        if (keyless) return;
        keyless = true;
        hostile.member.peerKeys.bind(hostile.peer, null);
      });
      context.rewrite(hostile.peer, 'contribution', (_to, message) => unsigned(message));
      context.rewrite(hostile.peer, 'shard-result', (_to, message) => unsigned(message));
      context.rewrite(hostile.peer, 'hash-report', (_to, message) => unsigned(message));
    },
  },
  {
    name: 'forged-commit',
    family: 'authority',
    summary: 'a worker sends every replica a commit of each round as it opens, naming itself, then serves θ = 0',
    install(context, hostile) {
      const forgedRound = context.fragments.map(() => 0);
      const poison = servePoisonedState(context, hostile, (p) => forgedRound[p] ?? 0);
      hostile.member.on('round-open', (from, open) => {
        if (from !== context.coordinator || !context.isActive()) return;
        forgedRound[open.fragment] = open.round;
        context.forge(hostile.peer, everyoneBut(hostile), {
          kind: 'commit',
          fragment: open.fragment,
          round: open.round,
          hash: poison[open.fragment] as string,
          contributors: [hostile.peer],
          roomTokens: open.roomTokens,
        });
      });
    },
  },
  {
    name: 'forged-abort',
    family: 'authority',
    summary: 'a worker sends every replica an abort of each round as it opens',
    install(context, hostile) {
      hostile.member.on('round-open', (from, open) => {
        if (from !== context.coordinator || !context.isActive()) return;
        context.forge(hostile.peer, everyoneBut(hostile), {
          kind: 'abort',
          fragment: open.fragment,
          round: open.round,
          reason: 'deadline',
          message: 'forged by a worker',
        });
      });
    },
  },
  {
    name: 'forged-round-open',
    family: 'authority',
    summary: 'a worker replays each round-open to every replica as the next round, in its own name',
    install(context, hostile) {
      hostile.member.on('round-open', (from, open) => {
        if (from !== context.coordinator || !context.isActive()) return;
        context.forge(hostile.peer, everyoneBut(hostile), { ...open, round: open.round + 1 });
      });
    },
  },
  {
    name: 'tie-break-fake-hash',
    family: 'authority',
    summary: 'of 2 workers, the one whose id sorts first reports a fake hash every round, then serves θ = 0',
    workers: 2,
    hostileAt: 'first',
    install(context, hostile) {
      // the round a commit named it first in, which the host then fetches from it
      const namedRound = context.fragments.map(() => 0);
      const poison = servePoisonedState(context, hostile, (p) => namedRound[p] ?? 0);
      hostile.member.on('commit', (from, commit) => {
        if (from === context.coordinator && commit.contributors[0] === hostile.peer) {
          namedRound[commit.fragment] = commit.round;
        }
      });
      context.rewrite(hostile.peer, 'hash-report', (_to, report) => ({
        ...report,
        hash: poison[report.fragment] as string,
      }));
    },
  },
];

/**
 * Liveness: a participant that stalls rounds without ever going down, and one that
 * claims to reach nobody so that the coordinator's greedy participant choice keeps only it.
 */
import type { Attack } from './types.ts';

export const LIVENESS_ATTACKS: Attack[] = [
  {
    name: 'never-reports-hash',
    family: 'liveness',
    summary: 'a participant contributes and owns its shard but never reports its hash',
    install: (context, hostile) => context.rewrite(hostile.peer, 'hash-report', () => 'drop'),
  },
  {
    name: 'reachable-empty',
    family: 'liveness',
    summary: 'the worker whose id sorts first says in every heartbeat that it reaches nobody',
    hostileAt: 'first',
    install: (context, hostile) =>
      context.rewrite(hostile.peer, 'heartbeat', (_to, heartbeat) => ({ ...heartbeat, reachable: [] })),
  },
];

/**
 * Every attack `shoal attacks` runs, in the order of docs/hostile-volunteers.md's table, and the attacks
 * of that table that an in-memory room cannot hold (a signaling server, a killed process, a file on
 * disk), with the tests that cover them instead.
 */
import { AUTHORITY_ATTACKS } from './authority-attacks.ts';
import { CONTRIBUTION_ATTACKS } from './contribution-attacks.ts';
import { LIVENESS_ATTACKS } from './liveness-attacks.ts';
import { MEMORY_ATTACKS } from './memory-attacks.ts';
import { OWNER_ATTACKS } from './owner-attacks.ts';
import { PIPELINE_ATTACKS } from './pipeline-attacks.ts';
import type { Attack } from './types.ts';

export const ATTACKS: readonly Attack[] = [
  ...OWNER_ATTACKS,
  ...CONTRIBUTION_ATTACKS,
  ...LIVENESS_ATTACKS,
  ...AUTHORITY_ATTACKS,
  ...MEMORY_ATTACKS,
  ...PIPELINE_ATTACKS,
];

export interface AttackElsewhere {
  name: string;
  /** Why it is not run here, and the test that runs it. */
  where: string;
}

export const ATTACKS_ELSEWHERE: readonly AttackElsewhere[] = [
  {
    name: 'signaling-fill-rooms-and-connections',
    where:
      'a signaling server, not the in-memory room: apps/server/src/ip-limits.test.ts ("one address trying to fill maxRooms …", "… maxConnections …")',
  },
  {
    name: 'sigkill-host-resume',
    where: 'a killed process: apps/cli/src/host-crash.test.ts ("shoal host killed with SIGKILL …")',
  },
  {
    name: 'run-state-carries-host-secret',
    where: 'a file shoal host writes: apps/cli/src/host-crash.test.ts ("… a 0600 checkpoint without credentials …")',
  },
];

/** The attacks named in `only` (all when it is empty); an unknown name is an error naming the choices. */
export function selectAttacks(only: readonly string[] = []): Attack[] {
  if (only.length === 0) return [...ATTACKS];
  const unknown = only.filter((name) => !ATTACKS.some((a) => a.name === name));
  if (unknown.length > 0) {
    throw new RangeError(`unknown attack ${unknown.join(', ')}: choose from ${ATTACKS.map((a) => a.name).join(', ')}`);
  }
  return ATTACKS.filter((a) => only.includes(a.name));
}

/** The server-side attacks `shoal attacks` runs against a real server on loopback, after the room's. */
import { SIGNALING_ATTACKS } from './signaling-attacks.ts';
import { STORE_ATTACKS } from './store-attacks.ts';
import type { ServerAttack } from './types.ts';

export type { ServerAttack, ServerAttackFamily, ServerAttackOutcome } from './types.ts';

export const SERVER_ATTACKS: readonly ServerAttack[] = [...SIGNALING_ATTACKS, ...STORE_ATTACKS];

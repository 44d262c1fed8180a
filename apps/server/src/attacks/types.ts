/**
 * An attack on the server side of a room (signaling, the room store) that `shoal attacks` runs
 * against a real `shoal server` on loopback, beside the in-memory room's attacks
 * (packages/sim/src/attacks). Each attack starts what it needs (a server, a rooms directory),
 * attacks it, measures whether the victims kept what the room promises them, and cleans up.
 */

export type ServerAttackFamily = 'signaling' | 'store';

export interface ServerAttackOutcome {
  /** Measured, never assumed: the victims kept their connection, membership or secret. */
  stopped: boolean;
  /** Whether the server noticed: an error frame to the attacker, a counter, a log line. */
  detected: boolean;
  /** Inputs of the attacker the server refused, dropped or throttled. */
  refusals: number;
  /** What happened, in one line: the figures that decided `stopped`. */
  detail: string;
}

export interface ServerAttack {
  /** Kebab-case, unique across every attack `shoal attacks` runs (`--only` takes these). */
  name: string;
  family: ServerAttackFamily;
  /** What the attacker does, in one line. */
  summary: string;
  /** Runs the attack on fresh resources of its own and releases them, whatever happens. */
  run(): Promise<ServerAttackOutcome>;
}

/**
 * What `shoal host` prints: with --json one JSON line per event on stdout (HostEvent), else a line
 * of text for each (or nothing, for an event only --json readers want): members coming and going,
 * rounds committed and aborted, and the room's metrics.
 */
import { bitsPerByte } from '@shoal/data';
import type { HostMetrics } from '@shoal/room/services';
import type { CoordinatorEvent } from '@shoal/swarm';

/** What `--json` prints, one object per line. */
export type HostEvent =
  | {
      event: 'room';
      roomId: string;
      joinToken: string;
      joinUrl: string;
      /** The read-only view (`/watch/ROOM?key=…`); null from a server that issues no watch key. */
      watchUrl: string | null;
    }
  | { event: 'peer-joined'; peer: string }
  | { event: 'peer-left'; peer: string; reason: string }
  | { event: 'round-committed'; fragment: number; round: number; participants: number; hash: string }
  | { event: 'round-aborted'; fragment: number; round: number; reason: string }
  /** The room's step reached the schedule's total steps: a last checkpoint follows, and the process exits 0. */
  | { event: 'ended'; reason: 'schedule'; step: number }
  /**
   * Every --metrics-every-ms, and after an evaluation of θ_global that moved. The losses are in
   * nats per byte-token; each has its bits per byte beside it (docs/bits-per-byte.md).
   */
  | ({ event: 'metrics' } & Omit<HostMetrics, 'members'> & {
        trainBitsPerByte: number | null;
        evalBitsPerByte: number | null;
      })
  | {
      event: 'checkpoint';
      path: string;
      state: string;
      /** The rounds and hashes it holds: each fragment's last round this host had adopted. */
      fragments: { round: number; hash: string }[];
    }
  | {
      event: 'resumed';
      from: string;
      fragments: { round: number; hash: string }[];
      roomTokens: number;
      /** The room's step at the save (an older checkpoint's: 0): the room goes on from it. */
      step: number;
      /** Whether the signaling room was taken back (false: a new room, a new join link). */
      reclaimed: boolean;
    }
  /** The signaling socket dropped, or came back (ReconnectState's kind). */
  | { event: 'signaling'; state: 'connected' | 'reconnecting' | 'gave-up' | 'closed' };

/** Prints one event: a JSON line with --json, else `text` (null: nothing, an event only --json readers want). */
export type HostPrint = (event: HostEvent, text: string | null) => void;

/** The printer for `json`: HostEvent lines on stdout, or text. */
export function hostPrinter(json: boolean | undefined): HostPrint {
  return (event, text) => {
    if (json) process.stdout.write(`${JSON.stringify(event)}\n`);
    else if (text !== null) console.log(text);
  };
}

/** The coordinator's events `shoal host` prints (round-opened is not part of the contract). */
export function printCoordinatorEvent(print: HostPrint, event: CoordinatorEvent) {
  switch (event.event) {
    case 'peer-joined':
      return print({ event: 'peer-joined', peer: event.peer }, `+ ${event.peer} joined`);
    case 'peer-left':
      return print(
        { event: 'peer-left', peer: event.peer, reason: event.reason },
        `- ${event.peer} left (${event.reason})`,
      );
    case 'round-committed': {
      const { fragment, round, participants, hash } = event;
      return print(
        { event: 'round-committed', fragment, round, participants, hash },
        `fragment ${fragment} round ${round} committed by ${participants}: ${hash.slice(0, 16)}`,
      );
    }
    case 'round-aborted': {
      const { fragment, round, reason } = event;
      return print(
        { event: 'round-aborted', fragment, round, reason },
        `fragment ${fragment} round ${round} aborted: ${reason}`,
      );
    }
    default:
      return; // round-opened: not part of the contract
  }
}

/** The room's metrics: each loss in bits per byte first, its nats beside it. */
export function printMetrics(print: HostPrint, { members, ...figures }: HostMetrics): void {
  const { step, tokens, trainLoss, evalLoss, tokensPerSecond } = figures;
  const bits = (nats: number | null) => (nats === null ? null : bitsPerByte(nats));
  // "1.4203 bits/byte (0.9845 nats)": bits per byte first, as every loss is shown
  const shown = (nats: number | null) =>
    nats === null ? '—' : `${bitsPerByte(nats).toFixed(4)} bits/byte (${nats.toFixed(4)} nats)`;
  print(
    { event: 'metrics', ...figures, trainBitsPerByte: bits(trainLoss), evalBitsPerByte: bits(evalLoss) },
    `step ${step}  tokens ${tokens}  train ${shown(trainLoss)}  eval ${shown(evalLoss)}  ` +
      `${tokensPerSecond.toFixed(0)} tok/s  ${members} members`,
  );
}

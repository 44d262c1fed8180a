/**
 * The join page asks the server about its room before the person consents: whether the room
 * exists, whether the link's token admits to it, whether the host is there and what the room
 * trains. It takes no seat; the socket is closed at once. The server's answer is validated by
 * the signaling client's schemas.
 */
import type { RoomStatus } from '@shoal/protocol';
import type { RoomAbout } from '@shoal/signaling';
import { MOBY_DICK } from '../runtime/dataset.ts';
import { connectSignaling, statusLabel } from './room-link.ts';

export type RoomCheck =
  /** The room exists and the token admits to it. */
  | { kind: 'open'; roomId: string; hostPresent: boolean; status: RoomStatus | null; about: RoomAbout | null }
  /** The server said no: the person cannot join with this link, and `message` says what to do. */
  | { kind: 'refused'; code: 'no-such-room' | 'bad-token' | 'no-token'; message: string }
  /** The server could not be asked: joining may still work, and will say why if not. */
  | { kind: 'unknown'; message: string };

/** What the person reads when the server refuses a link (join says the same), or the link has no token. */
export function refusalText(code: 'no-such-room' | 'bad-token' | 'no-token', roomId: string): string {
  switch (code) {
    case 'no-such-room':
      return `Room ${roomId} does not exist (any more). Check the link, or ask the host for a new one.`;
    case 'bad-token':
      return 'This join link’s token is not valid: the host may have rotated it. Ask the host for the current link.';
    case 'no-token':
      return 'This join link has no token (…?token=…): perhaps it was cut short when copied. Ask the host for the whole link.';
  }
}

export async function checkRoom(roomId: string, token: string | null): Promise<RoomCheck> {
  if (!token) return { kind: 'refused', code: 'no-token', message: refusalText('no-token', roomId) };
  let signal: Awaited<ReturnType<typeof connectSignaling>>;
  try {
    signal = await connectSignaling({ keyed: false });
  } catch (error) {
    return { kind: 'unknown', message: (error as Error).message };
  }
  try {
    const answer = await signal.check(roomId, token);
    return { kind: 'open', ...answer };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'no-such-room' || code === 'bad-token') {
      return { kind: 'refused', code, message: refusalText(code, roomId) };
    }
    return { kind: 'unknown', message: `Could not check the room: ${(error as Error).message}` };
  } finally {
    signal.close();
  }
}

/** A room text's name as a person reads it. */
export const corpusName = (corpus: string) => (corpus === MOBY_DICK ? 'Moby Dick' : corpus);

/** A parameter count in millions, two significant digits: 0.12, 0.84, 11, 48. */
const millions = (params: number) => Number((params / 1e6).toPrecision(2)).toLocaleString('en-US');

/** "tiny (0.84M parameters)", "a model of 3.2M parameters", or null when the host has not said yet. */
export function modelText(about: RoomAbout | null): string | null {
  if (!about || (about.preset === null && about.params === null)) return null;
  const size = about.params === null ? null : `${millions(about.params)}M parameters`;
  if (about.preset === null) return `a model of ${size}`;
  return size ? `${about.preset} (${size})` : about.preset;
}

/** One sentence on an open room: what it trains, on what, and whether its host is there. */
export function roomSentence(check: Extract<RoomCheck, { kind: 'open' }>): string {
  const model = modelText(check.about);
  const corpus = check.about?.corpus ? corpusName(check.about.corpus) : null;
  const what = model
    ? `trains ${model}${corpus ? ` on ${corpus}` : ''}`
    : 'has not said yet what it trains (its host has not started it)';
  const host = check.hostPresent
    ? `the host is here${check.status ? `, ${statusLabel[check.status]}` : ''}`
    : 'the host is away for now (you can join; training waits for the host)';
  return `Room ${check.roomId} ${what}; ${host}.`;
}

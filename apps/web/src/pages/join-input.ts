/**
 * The landing page's join box: a pasted join (or watch) link, or a room code and its token, read
 * strictly. The server issues room ids of 9 random bytes and tokens and keys of 32, as base64url
 * (apps/server/src/rooms.ts): 12 and 43 characters. Anything else is a typo or a stray word, and
 * the box says what is wrong instead of sending the person to a room that cannot exist.
 */

/** base64url characters of n random bytes, unpadded. */
const base64urlLength = (bytes: number) => Math.ceil((bytes * 4) / 3);
export const ROOM_ID_LENGTH = base64urlLength(9);
export const SECRET_LENGTH = base64urlLength(32);

const BASE64URL = /^[A-Za-z0-9_-]+$/;
const isRoomId = (text: string) => text.length === ROOM_ID_LENGTH && BASE64URL.test(text);
const isSecret = (text: string) => text.length === SECRET_LENGTH && BASE64URL.test(text);

export type JoinInput =
  /** Nothing typed yet. */
  | { kind: 'empty' }
  /** Where to go: a path on this server, or a whole URL on another. */
  | { kind: 'go'; href: string }
  | { kind: 'invalid'; problem: string };

const HOW =
  'Paste the join link the host shared (…/join/ROOM?token=…), or the room code and its token with a space between.';

function roomProblem(room: string): string | null {
  if (isRoomId(room)) return null;
  return `“${room.slice(0, 40)}” is not a room code: room codes are ${ROOM_ID_LENGTH} characters (letters, digits, - and _).`;
}

function tokenProblem(token: string): string | null {
  if (isSecret(token)) return null;
  return `The token should be ${SECRET_LENGTH} characters (letters, digits, - and _); this one has ${token.length}.`;
}

/** A path /join/ROOM?token=… or /watch/ROOM?key=…, checked. */
function linkOf(pathname: string, search: string): JoinInput {
  const [, kind, room = '', extra] = pathname.split('/');
  if ((kind !== 'join' && kind !== 'watch') || extra !== undefined) {
    return { kind: 'invalid', problem: `That is not a Shoal join link. ${HOW}` };
  }
  const roomId = decodeURIComponent(room);
  const param = kind === 'join' ? 'token' : 'key';
  const secret = new URLSearchParams(search).get(param);
  const problem =
    roomProblem(roomId) ??
    (secret === null
      ? `That link has no ${param} (?${param}=…): ask the host for the whole link.`
      : tokenProblem(secret));
  if (problem) return { kind: 'invalid', problem };
  return { kind: 'go', href: `/${kind}/${roomId}?${param}=${secret}` };
}

/** What the join box holds: where to go, or what is wrong with it. */
export function readJoinInput(input: string, origin?: string): JoinInput {
  const text = input.trim();
  if (!text) return { kind: 'empty' };
  if (/^https?:\/\//i.test(text)) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return { kind: 'invalid', problem: `That link is not a valid address. ${HOW}` };
    }
    const read = linkOf(url.pathname, url.search);
    // a link to another Shoal server goes there; one to this server stays a path
    if (read.kind === 'go' && origin !== undefined && url.origin !== origin)
      return { kind: 'go', href: url.origin + read.href };
    return read;
  }
  if (text.startsWith('/')) {
    const [pathname = '', search = ''] = text.split(/(?=\?)/);
    return linkOf(pathname, search);
  }
  const parts = /^([^\s?]+)(?:\s+|\?token=)(\S+)$/.exec(text);
  if (!parts) {
    const word = text.split(/\s+/).length === 1 ? text : null;
    if (word && isRoomId(word)) {
      return {
        kind: 'invalid',
        problem: 'That is a room code without its token: add the token after a space, or paste the whole link.',
      };
    }
    return { kind: 'invalid', problem: HOW };
  }
  const [, room = '', token = ''] = parts;
  const problem = roomProblem(room) ?? tokenProblem(token);
  return problem ? { kind: 'invalid', problem } : { kind: 'go', href: `/join/${room}?token=${token}` };
}

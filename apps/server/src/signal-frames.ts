/**
 * One frame from a client, checked in order of cost: text only, size, a nesting scan, JSON.parse,
 * a known kind, then the zod union. Pure, so the order and the reason codes are tested directly.
 *
 * Size: frames are at most maxFrameBytes, except a host's publish (its room view; `ws` holds it to
 * maxPublishBytes). A frame over maxFrameBytes is refused unscanned and unparsed unless it comes
 * from a host and begins as a publish does (`{"kind":"publish",`, as every client writes it): a
 * host's other large frames cost a look at their first bytes, not a full parse.
 */
import { jsonDepth } from '@shoal/protocol';
import { CLIENT_MESSAGE_KINDS, type ClientMessage, clientMessageSchema, type SignalErrorCode } from '@shoal/signaling';

type ParsedFrame =
  | { ok: true; message: ClientMessage; bytes: number }
  | { ok: false; code: SignalErrorCode; message: string; ref?: string };

export function parseClientFrame(
  data: Uint8Array | Uint8Array[] | ArrayBuffer,
  isBinary: boolean,
  limits: { maxJsonDepth: number; maxFrameBytes: number },
  /** The sender hosts a room: its publish may exceed maxFrameBytes. */
  mayPublish = false,
): ParsedFrame {
  if (isBinary) return { ok: false, code: 'binary-frame', message: 'signaling frames are JSON text' };
  const { maxJsonDepth: maxDepth, maxFrameBytes } = limits;
  const size = Array.isArray(data) ? data.reduce((sum, part) => sum + part.byteLength, 0) : data.byteLength;
  if (size > maxFrameBytes && !mayPublish) {
    return { ok: false, code: 'too-big', message: `frames are at most ${maxFrameBytes} bytes` };
  }
  const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Uint8Array);
  if (size > maxFrameBytes) {
    const kind = leadingKind(bytes);
    if (kind !== 'publish') {
      const message = `frames other than publish are at most ${maxFrameBytes} bytes`;
      return kind === null
        ? { ok: false, code: 'too-big', message }
        : { ok: false, code: 'too-big', message, ref: kind };
    }
  }
  const text = bytes.toString('utf8');
  if (jsonDepth(text) > maxDepth) return { ok: false, code: 'too-deep', message: `JSON nests deeper than ${maxDepth}` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, code: 'bad-json', message: 'the frame is not JSON' };
  }
  const kind = typeof parsed === 'object' && parsed !== null ? (parsed as { kind?: unknown }).kind : undefined;
  if (typeof kind !== 'string')
    return { ok: false, code: 'schema', message: 'a message is an object with a string kind' };
  if (!CLIENT_MESSAGE_KINDS.includes(kind)) {
    return { ok: false, code: 'unknown-kind', message: `unknown kind ${JSON.stringify(kind.slice(0, 32))}` };
  }
  const result = clientMessageSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const message = `${issue?.path.join('.') || kind}: ${issue?.message ?? 'invalid'}`;
    return { ok: false, code: 'schema', message, ref: kind };
  }
  if (bytes.length > maxFrameBytes && result.data.kind !== 'publish') {
    const message = `frames other than publish are at most ${maxFrameBytes} bytes`;
    return { ok: false, code: 'too-big', message, ref: kind };
  }
  return { ok: true, message: result.data, bytes: bytes.length };
}

/** `{"kind":"name",` at the start of a frame (whitespace allowed): the name, if it is a short plain word. */
const LEADING_KIND = /^\s*\{\s*"kind"\s*:\s*"([a-z-]{1,32})"\s*,/;

/** The kind a frame names first, read off its first 128 bytes only; null when it does not start so. */
function leadingKind(bytes: Buffer): string | null {
  const match = LEADING_KIND.exec(bytes.subarray(0, 128).toString('latin1'));
  return match?.[1] ?? null;
}

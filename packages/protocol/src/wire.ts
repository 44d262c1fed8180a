/**
 * Messages to bytes and back. The layout is in header.ts: a 48-byte little-endian header, then
 * the kind's body as a JSON object, then the binary payload of the kinds that have one.
 *
 * Why JSON + binary rather than all binary: control messages are small and rare (a roster, a
 * heartbeat a second), JSON keeps them readable in logs and lets a minor version add optional
 * fields; the bytes that matter for bandwidth (Δ shards, results, state) are raw payloads, and
 * the header carries everything a router or counter needs without parsing JSON.
 *
 * `decode` faces strangers: it never throws, on any input. It checks, cheapest first: size,
 * magic, major version, kind, reserved bits, lengths against the limits and the buffer, header
 * fields for the kind, the hash, UTF-8, JSON nesting, JSON syntax, the kind's schema, and the
 * payload's length against the body. The first failure is returned as a reason code (for
 * counters) and a sentence (for logs and the `rejected` notice). A decoded payload is a view
 * into the input, not a copy.
 *
 * `encode` serves honest senders and throws a WireEncodeError on a message that would not decode,
 * so a bug in the swarm surfaces at the sender rather than as a rejection counter elsewhere.
 *
 * The hash needs WebAssembly (hash-wasm's XXH3, ~GB/s), which instantiates asynchronously; so the
 * codec is made once with `await createWireCodec()`, and encode and decode are synchronous.
 */

import { createXXHash3 } from 'hash-wasm';
import { codecNameOfId } from './codec-ids.ts';
import { headerFieldsProblem, headerNumbers, type Problem, payloadProblem } from './fields.ts';
import { HASH_BYTES, HASH_OFFSET, HEADER_BYTES, hashedParts, hasMagic, readHeader, writeHeader } from './header.ts';
import { jsonDepth } from './json-depth.ts';
import { resolveWireLimits, type WireLimits } from './limits.ts';
import {
  type HeaderValues,
  kindOfId,
  MESSAGE_SPECS,
  type Message,
  type MessageKind,
  PROTOCOL_VERSION,
} from './messages.ts';

export type WireRejectReason =
  | 'not-bytes'
  | 'too-short'
  | 'too-large'
  | 'magic'
  | 'version'
  | 'unknown-kind'
  | 'reserved'
  | 'json-too-large'
  | 'length'
  | 'header-field'
  | 'codec'
  | 'payload'
  | 'hash'
  | 'json'
  | 'json-depth'
  | 'schema'
  | 'internal';

export type DecodeResult =
  | { ok: true; message: Message; runId: number; minor: number }
  | { ok: false; reason: WireRejectReason; detail: string; kind?: MessageKind };

export interface WireCodec {
  readonly limits: Readonly<WireLimits>;
  /** The message's bytes under run `runId` (0 for a hello, before the run is known). */
  encode(message: Message, runId: number): Uint8Array;
  /** Never throws. */
  decode(bytes: Uint8Array): DecodeResult;
}

export class WireEncodeError extends Error {
  override name = 'WireEncodeError';
}

export interface WireCodecOptions {
  limits?: Partial<WireLimits>;
}

const DETAIL_MAX = 300;

function schemaDetail(issues: readonly { path: PropertyKey[]; message: string }[]): string {
  const issue = issues[0];
  if (!issue) return 'does not match its schema';
  const path = issue.path.map(String).join('.') || '(body)';
  return `${path}: ${issue.message}`.slice(0, DETAIL_MAX);
}

export async function createWireCodec(options: WireCodecOptions = {}): Promise<WireCodec> {
  const limits = Object.freeze(resolveWireLimits(options.limits));
  const hasher = await createXXHash3();
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  const utf8Encoder = new TextEncoder();

  // one hasher, reused: hashing is synchronous, so calls cannot interleave
  function hashOf(bytes: Uint8Array): Uint8Array {
    hasher.init();
    for (const part of hashedParts(bytes)) hasher.update(part);
    return hasher.digest('binary');
  }

  function encode(message: Message, runId: number): Uint8Array {
    const spec = MESSAGE_SPECS[message?.kind as MessageKind];
    if (!spec) throw new WireEncodeError(`Unknown message kind ${JSON.stringify(message?.kind)}`);
    const kind = message.kind;
    const fail = (detail: string): never => {
      throw new WireEncodeError(`${kind}: ${detail}`);
    };
    if (!Number.isInteger(runId) || runId < 0 || runId > 0xffff_ffff) fail(`run id ${runId} is not a u32`);
    const numbers = headerNumbers(message);
    const fieldProblem = headerFieldsProblem(kind, numbers);
    if (fieldProblem) fail(fieldProblem.detail);

    const skip = new Set<string>(['kind', 'payload', ...spec.header]);
    const body = Object.fromEntries(Object.entries(message).filter(([key]) => !skip.has(key)));
    const parsed = spec.body.safeParse(body);
    if (!parsed.success) fail(schemaDetail(parsed.error.issues));
    const json = utf8Encoder.encode(JSON.stringify(parsed.data));
    if (json.length > limits.maxJsonBytes) fail(`JSON part of ${json.length} bytes exceeds ${limits.maxJsonBytes}`);

    const payload = spec.payload ? (message as { payload?: unknown }).payload : new Uint8Array(0);
    if (!(payload instanceof Uint8Array)) return fail('payload must be a Uint8Array');
    const payloadIssue = payloadProblem(kind, parsed.data as object, payload.length);
    if (payloadIssue) fail(payloadIssue.detail);

    const total = HEADER_BYTES + json.length + payload.length;
    if (total > limits.maxMessageBytes) fail(`${total} bytes exceed the ${limits.maxMessageBytes}-byte message limit`);
    const bytes = new Uint8Array(total);
    writeHeader(bytes, {
      major: PROTOCOL_VERSION.major,
      minor: PROTOCOL_VERSION.minor,
      kindId: spec.id,
      runId,
      ...numbers,
      jsonLength: json.length,
      payloadLength: payload.length,
    });
    bytes.set(json, HEADER_BYTES);
    bytes.set(payload, HEADER_BYTES + json.length);
    bytes.set(hashOf(bytes), HASH_OFFSET);
    return bytes;
  }

  function decodeUnsafe(bytes: Uint8Array): DecodeResult {
    const reject = (reason: WireRejectReason, detail: string, kind?: MessageKind): DecodeResult =>
      kind === undefined ? { ok: false, reason, detail } : { ok: false, reason, detail, kind };
    if (!(bytes instanceof Uint8Array)) return reject('not-bytes', `expected a Uint8Array, got ${typeof bytes}`);
    if (bytes.length < HEADER_BYTES) {
      return reject('too-short', `${bytes.length} bytes, a message has at least ${HEADER_BYTES}`);
    }
    if (bytes.length > limits.maxMessageBytes) {
      return reject('too-large', `${bytes.length} bytes exceed the ${limits.maxMessageBytes}-byte limit`);
    }
    if (!hasMagic(bytes)) return reject('magic', 'not a Shoal message (no "SHOL" magic)');
    const header = readHeader(bytes);
    if (header.major !== PROTOCOL_VERSION.major) {
      return reject(
        'version',
        `protocol ${header.major}.${header.minor}, this peer speaks ${PROTOCOL_VERSION.major}.x`,
      );
    }
    const kind = kindOfId(header.kindId);
    if (kind === undefined) return reject('unknown-kind', `kind id ${header.kindId} is unknown`);
    const spec = MESSAGE_SPECS[kind];
    if (header.flags !== 0 || header.reserved !== 0) return reject('reserved', 'reserved header bits are set', kind);
    if (header.jsonLength > limits.maxJsonBytes) {
      return reject('json-too-large', `JSON part of ${header.jsonLength} bytes exceeds ${limits.maxJsonBytes}`, kind);
    }
    const declared = HEADER_BYTES + header.jsonLength + header.payloadLength;
    if (declared !== bytes.length) {
      return reject('length', `header declares ${declared} bytes, the message has ${bytes.length}`, kind);
    }
    const problem: Problem | null =
      headerFieldsProblem(kind, header) ??
      (spec.payload || header.payloadLength === 0
        ? null
        : { reason: 'payload', detail: `${kind} carries no payload, got ${header.payloadLength} bytes` });
    if (problem) return reject(problem.reason, problem.detail, kind);

    const expectedHash = hashOf(bytes);
    for (let i = 0; i < HASH_BYTES; i++) {
      if (bytes[HASH_OFFSET + i] !== expectedHash[i]) return reject('hash', 'the message hash does not match', kind);
    }

    const jsonEnd = HEADER_BYTES + header.jsonLength;
    let text: string;
    try {
      text = utf8.decode(bytes.subarray(HEADER_BYTES, jsonEnd));
    } catch {
      return reject('json', 'the JSON part is not valid UTF-8', kind);
    }
    if (jsonDepth(text) > limits.maxJsonDepth) {
      return reject('json-depth', `the JSON part nests deeper than ${limits.maxJsonDepth}`, kind);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      return reject('json', `the JSON part does not parse: ${String((error as Error).message).slice(0, 120)}`, kind);
    }
    const parsed = spec.body.safeParse(json);
    if (!parsed.success) return reject('schema', schemaDetail(parsed.error.issues), kind);
    const payloadIssue = payloadProblem(kind, parsed.data as object, header.payloadLength);
    if (payloadIssue) return reject(payloadIssue.reason, payloadIssue.detail, kind);

    const headerValues: Partial<HeaderValues> = {};
    for (const field of spec.header) {
      if (field === 'codec') headerValues.codec = codecNameOfId(header.codecId);
      else headerValues[field] = header[field];
    }
    const message = { ...(parsed.data as object), ...headerValues, kind } as Record<string, unknown>;
    if (spec.payload) message.payload = bytes.subarray(jsonEnd);
    return { ok: true, message: message as Message, runId: header.runId, minor: header.minor };
  }

  function decode(bytes: Uint8Array): DecodeResult {
    try {
      return decodeUnsafe(bytes);
    } catch (error) {
      // every path above returns; this guards the boundary against a bug in one of them
      return { ok: false, reason: 'internal', detail: `decoder fault: ${String(error)}`.slice(0, DETAIL_MAX) };
    }
  }

  return { limits, encode, decode };
}

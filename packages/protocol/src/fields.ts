/**
 * The checks wire.ts runs between the header and the schema: header fields per kind, the
 * payload rules a schema cannot see, and a bound on JSON nesting before JSON.parse sees it.
 * Each returns a problem (a reason code and a sentence) or null, so that encode can throw it and
 * decode can return it.
 */
import { CODEC_IDS, codecNameOfId } from './codec-ids.ts';
import { NONE_U8, NONE_U16, NONE_U32, NONE_WEIGHT, type RawHeader } from './header.ts';
import { MAX_FRAGMENTS, MAX_PARTICIPANTS } from './limits.ts';
import {
  type HeaderField,
  type HeaderValues,
  MESSAGE_SPECS,
  type Message,
  type MessageKind,
  pipePayloadBytes,
} from './messages.ts';

export interface Problem {
  reason: 'header-field' | 'codec' | 'payload';
  detail: string;
}

const HEADER_FIELDS: readonly HeaderField[] = ['fragment', 'round', 'shard', 'codec', 'weight'];

/** Header numbers as stored, for a message's header fields ("none" for those its kind does not use). */
export function headerNumbers(
  message: Message,
): Pick<RawHeader, 'fragment' | 'round' | 'shard' | 'codecId' | 'weight'> {
  const used = new Set<HeaderField>(MESSAGE_SPECS[message.kind].header);
  const values = message as Partial<HeaderValues>;
  return {
    fragment: used.has('fragment') ? (values.fragment as number) : NONE_U16,
    round: used.has('round') ? (values.round as number) : NONE_U32,
    shard: used.has('shard') ? (values.shard as number) : NONE_U16,
    codecId: used.has('codec') ? (CODEC_IDS[values.codec as HeaderValues['codec']] ?? -1) : NONE_U8,
    weight: used.has('weight') ? (values.weight as number) : NONE_WEIGHT,
  };
}

const NONE: Record<HeaderField, number> = {
  fragment: NONE_U16,
  round: NONE_U32,
  shard: NONE_U16,
  codec: NONE_U8,
  weight: NONE_WEIGHT,
};

function valueProblem(field: HeaderField, value: number): Problem | null {
  const integer = (max: number) =>
    Number.isInteger(value) && value >= 0 && value <= max
      ? null
      : ({ reason: 'header-field', detail: `${field} ${value} is outside 0 … ${max}` } as const);
  switch (field) {
    case 'fragment':
      return integer(MAX_FRAGMENTS - 1);
    case 'round':
      return integer(NONE_U32 - 1);
    case 'shard':
      return integer(MAX_PARTICIPANTS - 1);
    case 'codec':
      return codecNameOfId(value) === undefined ? { reason: 'codec', detail: `codec id ${value} is unknown` } : null;
    case 'weight':
      return Number.isSafeInteger(value) && value >= 1
        ? null
        : { reason: 'header-field', detail: `weight ${value} is not a whole number of tokens ≥ 1` };
  }
}

/** Used fields valid, unused ones "none". `header` holds stored numbers (codec as its id). */
export function headerFieldsProblem(
  kind: MessageKind,
  header: Pick<RawHeader, 'fragment' | 'round' | 'shard' | 'codecId' | 'weight'>,
): Problem | null {
  const used = new Set<HeaderField>(MESSAGE_SPECS[kind].header);
  for (const field of HEADER_FIELDS) {
    const value = field === 'codec' ? header.codecId : header[field];
    if (used.has(field)) {
      const problem = valueProblem(field, value);
      if (problem) return problem;
    } else if (!Object.is(value, NONE[field])) {
      return { reason: 'header-field', detail: `${kind} does not use the ${field} field, which holds ${value}` };
    }
  }
  return null;
}

/** Payload rules that need the body: lengths the body implies, and payloads where none belongs. */
export function payloadProblem(kind: MessageKind, body: object, payloadLength: number): Problem | null {
  if (!MESSAGE_SPECS[kind].payload) {
    return payloadLength === 0
      ? null
      : { reason: 'payload', detail: `${kind} carries no payload, got ${payloadLength} bytes` };
  }
  if (kind === 'state-transfer') {
    const { start, end } = body as { start: number; end: number };
    const expected = 8 * (end - start); // θ then m, fp32
    if (payloadLength !== expected) {
      return {
        reason: 'payload',
        detail: `state for ${end - start} values is ${expected} bytes, got ${payloadLength}`,
      };
    }
  }
  if (kind === 'pipe') {
    const expected = pipePayloadBytes(body as Parameters<typeof pipePayloadBytes>[0]);
    if (payloadLength !== expected) {
      return { reason: 'payload', detail: `this pipe message's body implies ${expected} bytes, got ${payloadLength}` };
    }
  }
  if (kind === 'shard-result') {
    const result = body as { verdicts: { reason: string }[]; check?: boolean };
    const accepted = result.verdicts.some((v) => v.reason === '');
    // a checker reports its result's hash only: never a payload
    if (result.check) {
      return payloadLength === 0 ? null : { reason: 'payload', detail: 'a check carries no payload' };
    }
    if (accepted !== payloadLength > 0) {
      return {
        reason: 'payload',
        detail: accepted
          ? 'a result with accepted contributions has an empty payload'
          : 'a result of no contribution has a payload',
      };
    }
  }
  return null;
}

/**
 * The room's text over the mesh: a host that trains on a text its workers do not have (a file
 * uploaded on the dashboard, `shoal host --data`) serves it; a worker without it fetches it from
 * the coordinator in parts (corpus-request → corpus-transfer), a few in flight, and checks the
 * whole against the run config's fingerprint before a single batch is drawn from it.
 */
import { corpusFingerprint } from '@shoal/data';
import {
  type CorpusTransferMessage,
  corpusFingerprintSchema,
  corpusLengthOf,
  MAX_CORPUS_PART_BYTES,
  type PeerId,
} from '@shoal/protocol';
import type { Member } from './member.ts';

/** Bytes per corpus-request: 256 KiB (the mesh splits each answer into data-channel chunks). */
const CORPUS_PART_BYTES = 256 * 1024;

export interface CorpusServerOptions {
  /** A requester may fetch the text this many times over before it is refused. Default 4. */
  maxCopiesPerPeer?: number;
}

export interface CorpusServer {
  /** Bytes sent to each requester. */
  readonly served: ReadonlyMap<PeerId, number>;
  stop(): void;
}

/** Answers corpus-requests for `text` (any member may ask: the text is the room's, not a secret). */
export function serveCorpus(member: Member, text: Uint8Array, options: CorpusServerOptions = {}): CorpusServer {
  const fingerprint = corpusFingerprint(text);
  const quota = (options.maxCopiesPerPeer ?? 4) * text.length;
  const served = new Map<PeerId, number>();
  const stop = member.on('corpus-request', (from, request) => {
    if (request.fingerprint !== fingerprint) {
      member.rejectBack(from, 'corpus-request', 'corpus-unknown', `this member serves ${fingerprint} only`);
      return;
    }
    const sent = served.get(from) ?? 0;
    const length = request.end - request.start;
    if (sent + length > quota) {
      member.rejectBack(from, 'corpus-request', 'quota', `already sent ${sent} bytes of a ${text.length}-byte text`);
      return;
    }
    served.set(from, sent + length);
    void member.send(from, {
      kind: 'corpus-transfer',
      fingerprint,
      start: request.start,
      end: request.end,
      payload: text.subarray(request.start, request.end),
    });
  });
  return { served, stop };
}

export interface FetchCorpusOptions {
  /** The run config's `data.fingerprint`: the text's length and checksum. */
  fingerprint: string;
  /** For messages: the text's name. */
  name?: string;
  /** Default CORPUS_PART_BYTES. */
  partBytes?: number;
  /** Requests in flight at once. Default 4. */
  window?: number;
  /** A part not answered within this long is asked for again. Default 20 s. */
  timeoutMs?: number;
  /** Asks per part before giving up. Default 3. */
  attempts?: number;
  /** After each part: bytes received so far, of `total`. */
  onProgress?: (received: number, total: number) => void;
}

/**
 * Fetches the text `fingerprint` names from `holder`. Rejects, with a sentence for a person, when
 * the holder refuses, goes away, stops answering, or sends bytes that do not match.
 */
export async function fetchCorpusFrom(
  member: Member,
  holder: PeerId,
  options: FetchCorpusOptions,
): Promise<Uint8Array> {
  const fingerprint = corpusFingerprintSchema.parse(options.fingerprint);
  const total = corpusLengthOf(fingerprint);
  const name = options.name ?? 'the room’s text';
  const partBytes = Math.min(options.partBytes ?? CORPUS_PART_BYTES, MAX_CORPUS_PART_BYTES);
  const window = Math.max(1, options.window ?? 4);
  const timeoutMs = options.timeoutMs ?? 20_000;
  const attempts = options.attempts ?? 3;
  const text = new Uint8Array(total);
  const parts: { start: number; end: number }[] = [];
  for (let start = 0; start < total; start += partBytes) parts.push({ start, end: Math.min(total, start + partBytes) });

  let received = 0;
  let next = 0;
  const pending = new Map<number, { end: number; tries: number; cancel: () => void }>();
  const offs: (() => void)[] = [];
  let settle: { resolve: () => void; reject: (error: Error) => void } | null = null;
  const done = new Promise<void>((resolve, reject) => {
    settle = { resolve, reject };
  });
  const finish = (error?: Error) => {
    for (const part of pending.values()) part.cancel();
    pending.clear();
    for (const off of offs) off();
    if (error) settle?.reject(error);
    else settle?.resolve();
    settle = null;
  };

  const ask = (start: number, end: number, tries: number) => {
    const cancel = member.clock.setTimer(timeoutMs, () => {
      if (!pending.has(start)) return;
      if (tries >= attempts) {
        finish(new Error(`${name}: the host did not send bytes ${start}–${end} after ${attempts} requests`));
        return;
      }
      ask(start, end, tries + 1);
    });
    pending.set(start, { end, tries, cancel });
    void member.send(holder, { kind: 'corpus-request', fingerprint, start, end });
  };
  const fill = () => {
    while (settle && pending.size < window && next < parts.length) {
      const part = parts[next++] as { start: number; end: number };
      ask(part.start, part.end, 1);
    }
    if (settle && pending.size === 0 && next >= parts.length) finish();
  };

  const accept = (from: PeerId, message: CorpusTransferMessage) => {
    const part = pending.get(message.start);
    if (from !== holder || message.fingerprint !== fingerprint || !part || part.end !== message.end) {
      member.refuse(
        from,
        'corpus-transfer',
        'not-requested',
        `bytes ${message.start}–${message.end} were not asked for`,
      );
      return;
    }
    if (message.payload.length !== message.end - message.start) {
      member.refuse(
        from,
        'corpus-transfer',
        'length',
        `${message.payload.length} bytes for a ${message.end - message.start}-byte range`,
      );
      return;
    }
    part.cancel();
    pending.delete(message.start);
    text.set(message.payload, message.start);
    received += message.payload.length;
    options.onProgress?.(received, total);
    fill();
  };
  offs.push(member.on('corpus-transfer', accept));
  offs.push(
    member.on('rejected', (from, message) => {
      if (from !== holder || message.about !== 'corpus-request') return;
      finish(new Error(`${name}: the host refused to send it (${message.reason}: ${message.message})`));
    }),
  );
  offs.push(
    member.transport.on('peer-down', (peer) => {
      if (peer === holder) finish(new Error(`${name}: the host left before sending all of it`));
    }),
  );
  fill();
  await done;

  const got = corpusFingerprint(text);
  if (got !== fingerprint) {
    throw new Error(
      `${name}: the received text has fingerprint ${got}, the room's is ${fingerprint}; not training on it`,
    );
  }
  return text;
}

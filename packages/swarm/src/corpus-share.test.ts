import { corpusFingerprint } from '@shoal/data';
import { createWireCodec, HEADER_OFFSETS, MESSAGE_SPECS } from '@shoal/protocol';
import { SimNetwork, VirtualClock } from '@shoal/sim';
import { describe, expect, it } from 'vitest';
import { fetchCorpusFrom, serveCorpus } from './corpus-share.ts';
import { Member } from './member.ts';

const RUN = 3;
const codec = await createWireCodec();

/** A text of `length` bytes that is not periodic (a wrong offset would show). */
function textOf(length: number, seed = 1): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = 32 + ((x >>> 16) % 95);
  }
  return bytes;
}

function pair() {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 10, upMbps: 100, downMbps: 100 });
  const host = new Member(network.join('host'), codec, clock, RUN);
  const worker = new Member(network.join('w0'), codec, clock, RUN);
  /** Runs the clock until `work` settles; its outcome. */
  const drive = async <T>(work: Promise<T>) => {
    let settled = false;
    const watched = work.finally(() => {
      settled = true;
    });
    watched.catch(() => {}); // the caller sees the rejection; not unhandled while the clock runs
    await clock.runAsync({ stopWhen: () => settled, until: 600_000 });
    return watched;
  };
  return { clock, network, host, worker, drive };
}

const isTransfer = (bytes: Uint8Array) => bytes[HEADER_OFFSETS.kind] === MESSAGE_SPECS['corpus-transfer'].id;

describe('the room text over the mesh', () => {
  it('arrives whole, in parts, with progress, and checks out', async () => {
    const { host, worker, drive } = pair();
    const text = textOf(300_003);
    const server = serveCorpus(host, text);
    const progress: number[] = [];
    const got = await drive(
      fetchCorpusFrom(worker, 'host', {
        fingerprint: corpusFingerprint(text),
        partBytes: 30_000,
        onProgress: (received, total) => {
          expect(total).toBe(text.length);
          progress.push(received);
        },
      }),
    );
    expect(got).toEqual(text);
    expect(progress).toHaveLength(11);
    expect(progress.at(-1)).toBe(text.length);
    expect(server.served.get('w0')).toBe(text.length);
    expect(worker.counters.total()).toBe(0);
  });

  it('asks again for a lost part', async () => {
    const { network, host, worker, drive } = pair();
    const text = textOf(50_000);
    serveCorpus(host, text);
    let dropped = 0;
    network.onSend('host', (_to, bytes) => (isTransfer(bytes) && dropped++ === 1 ? 'drop' : 'deliver'));
    const got = await drive(
      fetchCorpusFrom(worker, 'host', { fingerprint: corpusFingerprint(text), partBytes: 8192, timeoutMs: 1_000 }),
    );
    expect(got).toEqual(text);
    expect(dropped).toBe(8); // 7 parts, one of them twice
  });

  it('refuses a text whose bytes do not match the fingerprint, and bytes it did not ask for', async () => {
    const { host, worker, drive } = pair();
    const text = textOf(20_000);
    const fingerprint = corpusFingerprint(text);
    // a holder that claims the fingerprint but flips one byte
    host.on('corpus-request', (from, request) => {
      const payload = text.slice(request.start, request.end);
      if (request.start === 0) payload[5] = (payload[5] as number) ^ 1;
      void host.send(from, { kind: 'corpus-transfer', fingerprint, start: request.start, end: request.end, payload });
      // and a part nobody asked for
      void host.send(from, {
        kind: 'corpus-transfer',
        fingerprint,
        start: 19_999,
        end: 20_000,
        payload: text.slice(-1),
      });
    });
    await expect(drive(fetchCorpusFrom(worker, 'host', { fingerprint, partBytes: 4096 }))).rejects.toThrow(
      /fingerprint .* the room's is 20000:.*not training on it/,
    );
    expect(worker.counters.total('not-requested')).toBeGreaterThan(0);
  });

  it('fails with a reason when the holder serves another text, refuses, goes quiet or leaves', async () => {
    const other = pair();
    serveCorpus(other.host, textOf(10_000, 2));
    await expect(
      other.drive(
        fetchCorpusFrom(other.worker, 'host', { fingerprint: corpusFingerprint(textOf(10_000)), name: 'x.txt' }),
      ),
    ).rejects.toThrow(/x\.txt: the host refused to send it \(corpus-unknown/);

    const greedy = pair();
    const text = textOf(10_000);
    serveCorpus(greedy.host, text, { maxCopiesPerPeer: 1 });
    const fingerprint = corpusFingerprint(text);
    await expect(greedy.drive(fetchCorpusFrom(greedy.worker, 'host', { fingerprint }))).resolves.toEqual(text);
    await expect(greedy.drive(fetchCorpusFrom(greedy.worker, 'host', { fingerprint }))).rejects.toThrow(/quota/);
    expect(greedy.host.counters.total('quota')).toBe(1);

    const quiet = pair();
    await expect(
      quiet.drive(fetchCorpusFrom(quiet.worker, 'host', { fingerprint, timeoutMs: 500, attempts: 2 })),
    ).rejects.toThrow(/did not send bytes 0–10000 after 2 requests/);

    const gone = pair();
    const fetching = fetchCorpusFrom(gone.worker, 'host', { fingerprint });
    gone.network.crash('host');
    await expect(gone.drive(fetching)).rejects.toThrow(/the host left before sending all of it/);
  });

  it('refuses a malformed fingerprint before asking', async () => {
    const { worker } = pair();
    await expect(fetchCorpusFrom(worker, 'host', { fingerprint: '12:xyz' })).rejects.toThrow(/fingerprint/);
  });
});

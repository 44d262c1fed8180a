/**
 * What signing costs a member (protocol identity.ts): per message, the time to build the signed
 * bytes (SHA-256 of the payload) and sign them, and to build them again and verify, for Ed25519
 * and ECDSA P-256 in this runtime's WebCrypto; and the bytes a signature adds on the wire.
 *
 *   node --import tsx bench/identity.ts [--json]
 *
 * Messages are signed one after another (a member signs its sends in order); each figure is the
 * median of 7 runs of `count` messages.
 */
import {
  createIdentity,
  createWireCodec,
  importPeerKey,
  KEY_ALGORITHMS,
  type SignedMessage,
  signedBytesOf,
  verifySignature,
} from '@shoal/protocol';
import { SAMPLES } from '@shoal/protocol/test-fixtures';

const RUN = 7;
const RUNS = 7;

/** A contribution with `bytes` of payload (an fp4 shard of 2·bytes values), or the hash report. */
function messageOf(bytes: number | null): SignedMessage {
  if (bytes === null) return SAMPLES['hash-report'];
  const payload = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) payload[i] = (i * 2_654_435_761) >>> 24;
  return { ...SAMPLES.contribution, payload };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

async function timePerMessage(count: number, work: () => Promise<unknown>): Promise<number> {
  const runs: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const started = performance.now();
    for (let i = 0; i < count; i++) await work();
    runs.push((performance.now() - started) / count);
  }
  return median(runs);
}

const rows: { algorithm: string; payloadBytes: number; signMs: number; verifyMs: number }[] = [];
for (const algorithm of KEY_ALGORITHMS) {
  const identity = await createIdentity({ algorithm });
  const imported = { key: identity.key, imported: await importPeerKey(identity.key) };
  for (const payloadBytes of [null, 4 * 1024, 256 * 1024, 4 * 1024 * 1024]) {
    const message = messageOf(payloadBytes);
    const count = payloadBytes !== null && payloadBytes >= 1024 * 1024 ? 20 : 200;
    const signature = await identity.sign(await signedBytesOf(RUN, 'peer-a', message));
    const signMs = await timePerMessage(count, async () => identity.sign(await signedBytesOf(RUN, 'peer-a', message)));
    const verifyMs = await timePerMessage(count, async () => {
      if (!(await verifySignature(imported, await signedBytesOf(RUN, 'peer-a', message), signature))) {
        throw new Error('a signature that should verify did not');
      }
    });
    rows.push({ algorithm, payloadBytes: payloadBytes ?? 0, signMs, verifyMs });
  }
}

const codec = await createWireCodec();
const identity = await createIdentity();
const signature = await identity.sign(await signedBytesOf(RUN, 'peer-a', SAMPLES['hash-report']));
const added = {
  contribution:
    codec.encode({ ...SAMPLES.contribution, signature }, RUN).length - codec.encode(SAMPLES.contribution, RUN).length,
  'shard-result':
    codec.encode({ ...SAMPLES['shard-result'], signature }, RUN).length -
    codec.encode(SAMPLES['shard-result'], RUN).length,
  'hash-report':
    codec.encode({ ...SAMPLES['hash-report'], signature }, RUN).length -
    codec.encode(SAMPLES['hash-report'], RUN).length,
  hello: codec.encode({ ...SAMPLES.hello, key: identity.key }, 0).length - codec.encode(SAMPLES.hello, 0).length,
};

if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ node: process.version, rows, bytesAdded: added }));
} else {
  console.log(`Node ${process.version}; ms per message, median of ${RUNS} runs (SHA-256 of the payload included)`);
  console.log('algorithm    payload      sign ms   verify ms');
  for (const row of rows) {
    const payload = row.payloadBytes === 0 ? 'none' : `${row.payloadBytes / 1024} KiB`;
    console.log(
      `${row.algorithm.padEnd(12)} ${payload.padStart(9)} ${row.signMs.toFixed(3).padStart(10)} ${row.verifyMs.toFixed(3).padStart(11)}`,
    );
  }
  console.log('bytes added on the wire:', added);
}

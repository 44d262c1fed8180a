import { describe, expect, it } from 'vitest';
import { MAX_CORPUS_PART_BYTES, MAX_DATASET_FILE_BYTES } from './limits.ts';
import { kindOfId, MESSAGE_SPECS, type Message, PROTOCOL_VERSION } from './messages.ts';
import { datasetRefSchema, MESH_DATASET_URL } from './schemas.ts';
import { createForger, SAMPLES } from './test-fixtures.ts';
import { createWireCodec, type DecodeResult } from './wire.ts';

const codec = await createWireCodec();
const { forge } = await createForger();
const REQUEST_ID = MESSAGE_SPECS['dataset-request'].id;
const TRANSFER_ID = MESSAGE_SPECS['dataset-transfer'].id;

function expectSchemaRejection(result: DecodeResult, detail: RegExp) {
  expect(result.ok, JSON.stringify(result)).toBe(false);
  if (result.ok) return;
  expect(result.reason).toBe('schema');
  expect(result.detail).toMatch(detail);
}

const { kind: _request, ...requestBody } = SAMPLES['dataset-request'];
const { kind: _transfer, payload: _payload, ...transferBody } = SAMPLES['dataset-transfer'];
const request = (json: object) => codec.decode(forge({ kindId: REQUEST_ID, json }));
const transfer = (json: object, payload = new Uint8Array(6)) =>
  codec.decode(forge({ kindId: TRANSFER_ID, json, payload }));

describe('dataset-request and dataset-transfer', () => {
  it('take the ids after pipe, and round-trip', () => {
    expect([REQUEST_ID, TRANSFER_ID]).toEqual([20, 21]);
    expect(Math.max(...Object.values(MESSAGE_SPECS).map((spec) => spec.id))).toBe(TRANSFER_ID);
    expect(kindOfId(20)).toBe('dataset-request');
    expect(kindOfId(21)).toBe('dataset-transfer');
    expect(PROTOCOL_VERSION.minor).toBeGreaterThanOrEqual(7);
    for (const kind of ['dataset-request', 'dataset-transfer'] as const) {
      const message = SAMPLES[kind] as Message;
      expect(codec.decode(codec.encode(message, 7))).toEqual({
        ok: true,
        message,
        runId: 7,
        minor: PROTOCOL_VERSION.minor,
      });
    }
  });

  it('name manifest.json or a shard file, never a path', () => {
    expect(request({ ...requestBody, file: 'manifest.json' }).ok).toBe(true);
    expect(request({ ...requestBody, file: 'validation-00012.txt' }).ok).toBe(true);
    for (const file of [
      '../manifest.json',
      'a/train-00000.txt',
      'Train-00000.txt',
      '-x.txt',
      'x.bin',
      '',
      'manifest',
    ]) {
      expectSchemaRejection(request({ ...requestBody, file }), /^file/);
    }
    expectSchemaRejection(request({ ...requestBody, manifest: 'ABCD'.repeat(16) }), /^manifest/);
    expectSchemaRejection(request({ ...requestBody, manifest: 'ab'.repeat(16) }), /^manifest/);
  });

  it('ask for an ordered range of at most one part', () => {
    expectSchemaRejection(request({ ...requestBody, end: requestBody.start }), /^end.*below end/);
    expectSchemaRejection(request({ ...requestBody, start: 0, end: MAX_CORPUS_PART_BYTES + 1 }), /^end.*at most/);
    expect(request({ ...requestBody, start: 0, end: MAX_CORPUS_PART_BYTES }).ok).toBe(true);
    expectSchemaRejection(request({ ...requestBody, start: -1 }), /^start/);
    const last = { start: MAX_DATASET_FILE_BYTES - 10, end: MAX_DATASET_FILE_BYTES + 1 };
    expectSchemaRejection(request({ ...requestBody, ...last }), /^end/);
  });

  it('answer with a range inside the file, and no payload on a request', () => {
    expect(transfer(transferBody).ok).toBe(true);
    expectSchemaRejection(transfer({ ...transferBody, total: 5 }), /^end.*lie in the file/);
    expectSchemaRejection(transfer({ ...transferBody, total: MAX_DATASET_FILE_BYTES + 1 }), /^total/);
    expectSchemaRejection(transfer({ ...transferBody, start: 6 }), /^end.*below end/);
    const { total: _, ...noTotal } = transferBody;
    expectSchemaRejection(transfer(noTotal), /^total/);
    const stray = codec.decode(forge({ kindId: REQUEST_ID, json: requestBody, payload: new Uint8Array(1) }));
    expect(stray).toMatchObject({ ok: false, reason: 'payload' });
  });
});

describe('a dataset reference', () => {
  const ref = { manifest: 'ab'.repeat(32), trainShards: 4, validationShards: 1, trainBytes: 4096 };

  it("may be 'mesh:': from the host only", () => {
    expect(MESH_DATASET_URL).toBe('mesh:');
    expect(datasetRefSchema.parse({ ...ref, url: 'mesh:' }).url).toBe('mesh:');
    for (const url of ['https://example.org/d/', 'http://h:8080/d', '/datasets/books/']) {
      expect(datasetRefSchema.safeParse({ ...ref, url }).success).toBe(true);
    }
    for (const url of ['mesh:x', 'mesh', 'mesh:/d/', 'ftp://h/d/', 'datasets/', '/a b/', '']) {
      expect(datasetRefSchema.safeParse({ ...ref, url }).success, url).toBe(false);
    }
  });
});

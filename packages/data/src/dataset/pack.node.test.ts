import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOCUMENT_SEPARATOR, MANIFEST_FILE, MIN_SHARD_BYTES, PIECE_BYTES, parseManifest } from './manifest.ts';
import { invalidUtf8Offset, type PackProgress, packDataset, pieceLength } from './pack.node.ts';

const root = mkdtempSync(join(tmpdir(), 'shoal-pack-'));
const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true });

/** Deterministic text: words (some multi-byte) from a fixed list, lines and run-on stretches, by an LCG. */
function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
  const words = ['the', 'whale', 'sea', 'café', 'naïve', '漢字', 'ship', '🐟', 'Ahab', 'line', 'é', '漢', '👩‍🚀', 'x'];
  return {
    next,
    /** About `bytes` bytes; `lineBreaks` false: spaces only; a run of `noSpaceRun` bytes with neither. */
    text(bytes: number, lineBreaks = true, noSpaceRun = 0): string {
      const parts: string[] = [];
      let size = 0;
      while (size < bytes) {
        const word = words[Math.floor(next() * words.length)] as string;
        const gap = lineBreaks && next() < 0.08 ? '\n' : ' ';
        parts.push(word, gap);
        size += encoder.encode(word).length + 1;
        if (noSpaceRun > 0 && next() < 0.002) {
          let run = 0;
          while (run < noSpaceRun) {
            const word = words[Math.floor(next() * words.length)] as string;
            parts.push(word);
            run += encoder.encode(word).length;
          }
          size += run;
        }
      }
      return parts.join('');
    },
  };
}

/** The pieces of a document by the rule in manifest.ts, computed on the whole document at once. */
function referencePieces(document: Uint8Array): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let rest = document;
  while (rest.length > PIECE_BYTES) {
    const window = rest.subarray(0, PIECE_BYTES);
    let n = window.lastIndexOf(10) + 1 || window.lastIndexOf(32) + 1;
    if (n === 0) {
      n = PIECE_BYTES;
      while ((rest[n] as number) >= 0x80 && (rest[n] as number) < 0xc0) n--;
    }
    pieces.push(rest.subarray(0, n));
    rest = rest.subarray(n);
  }
  if (rest.length > 0) pieces.push(rest);
  return pieces;
}

/** Expected shard bytes per split: pieces dealt by j mod period, shards filled in order. */
function referenceShards(documents: Uint8Array[], shardBytes: number, period: number) {
  const splits = { train: [] as Uint8Array[][], validation: [] as Uint8Array[][] };
  const sizes = { train: [] as number[], validation: [] as number[] };
  const last = { train: { doc: -1, piece: -1 }, validation: { doc: -1, piece: -1 } };
  let j = 0;
  for (const [doc, document] of documents.entries()) {
    const pieces = referencePieces(document);
    expect(Buffer.concat(pieces).equals(document), 'the pieces join back into the document').toBe(true);
    for (const [k, piece] of pieces.entries()) {
      expect(piece.length).toBeLessThanOrEqual(PIECE_BYTES);
      strictDecoder.decode(piece); // whole characters only
      const split = j++ % period === period - 1 ? 'validation' : 'train';
      const shards = splits[split];
      const size = sizes[split];
      const joined = last[split].doc === doc && last[split].piece === k - 1;
      let separator = shards.length > 0 && !joined ? 2 : 0;
      if (shards.length === 0 || (size.at(-1) as number) + separator + piece.length > shardBytes) {
        shards.push([]);
        size.push(0);
        separator = 0;
      }
      if (separator) (shards.at(-1) as Uint8Array[]).push(encoder.encode(DOCUMENT_SEPARATOR));
      (shards.at(-1) as Uint8Array[]).push(piece);
      size[size.length - 1] = (size.at(-1) as number) + separator + piece.length;
      last[split] = { doc, piece: k };
    }
  }
  return {
    train: splits.train.map((s) => Buffer.concat(s)),
    validation: splits.validation.map((s) => Buffer.concat(s)),
  };
}

/** Reads every shard back: its bytes and SHA-256 as the manifest says, and its contents. */
async function readPack(outDir: string) {
  const manifestBytes = readFileSync(join(outDir, MANIFEST_FILE));
  const loaded = await parseManifest(manifestBytes, outDir);
  const read = (split: 'train' | 'validation') =>
    loaded[split].map((shard) => {
      const bytes = readFileSync(join(outDir, shard.file));
      expect(bytes.length, shard.file).toBe(shard.bytes);
      expect(createHash('sha256').update(bytes).digest('hex'), shard.file).toBe(shard.sha256);
      return bytes;
    });
  return { loaded, train: read('train'), validation: read('validation') };
}

// The corpus: a folder (nested, with a hidden file and the pack's own output inside it) and a JSONL file.
const gen = generator(12345);
const corpusDir = join(root, 'corpus');
mkdirSync(join(corpusDir, 'b-nested'), { recursive: true });
const textDocuments: [string, string][] = [
  ['a.txt', gen.text(1_300_000)], // over one 1 MiB read: pieces across reads
  ['b-nested/c.md', gen.text(150_000, false)], // no line breaks: cut at spaces
  ['b-nested/d.txt', gen.text(5_000)],
  ['e.txt', gen.text(400_000, true, 70_000)], // runs with no break: cut between characters
  ['f.txt', `${'é'.repeat(PIECE_BYTES / 2 - 1)}a${'漢'.repeat(30_000)}${'🐟'.repeat(20_000)}`],
];
for (const [name, text] of textDocuments) writeFileSync(join(corpusDir, name), text);
writeFileSync(join(corpusDir, '.hidden.txt'), 'never packed');
const records = Array.from({ length: 40 }, (_, i) => gen.text(i % 7 === 0 ? 90_000 : 8_000));
const jsonlPath = join(root, 'records.jsonl');
writeFileSync(jsonlPath, `${records.map((text, i) => JSON.stringify({ id: i, text })).join('\n')}\n\n`);
const documents = [...textDocuments.map(([, text]) => text), ...records].map((text) => encoder.encode(text));

describe('packDataset', () => {
  it('cuts pieces at a line break, else a space, else a character boundary', () => {
    const limit = 16;
    expect(pieceLength(encoder.encode('aaaa\nbbbb cccc dddd eeee'), limit)).toBe(5);
    expect(pieceLength(encoder.encode('aaaa bbbb cccc dddd eeee'), limit)).toBe(15);
    expect(pieceLength(encoder.encode(`${'a'.repeat(15)}éé`), limit)).toBe(15); // é straddles byte 16
    expect(pieceLength(encoder.encode(`${'a'.repeat(13)}🐟🐟`), limit)).toBe(13);
    expect(pieceLength(encoder.encode(`${'a'.repeat(16)}🐟`), limit)).toBe(16);
    expect(invalidUtf8Offset(encoder.encode('ok é 漢 🐟'))).toBe(-1);
    expect(invalidUtf8Offset(Uint8Array.of(0x61, 0xc3, 0x28))).toBe(1);
    expect(invalidUtf8Offset(Uint8Array.of(0x61, 0xed, 0xa0, 0x80))).toBe(1); // a surrogate
    expect(invalidUtf8Offset(Uint8Array.of(0x61, 0x62, 0xe6))).toBe(2); // cut short
  });

  for (const shardBytes of [MIN_SHARD_BYTES, 200 * 1024]) {
    for (const validationFraction of [0.05, 0.25, 0.5]) {
      it(`packs a folder and JSONL into ${shardBytes / 1024} KiB shards, validation ${validationFraction}`, async () => {
        // inside an input folder (never packed itself), replacing the previous case's pack
        const outDir = join(corpusDir, 'out');
        const progress: PackProgress[] = [];
        const result = await packDataset([corpusDir, jsonlPath], {
          outDir,
          shardBytes,
          validationFraction,
          licence: 'CC0',
          overwrite: true,
          onProgress: (p) => progress.push(p),
        });
        const { loaded, train, validation } = await readPack(outDir);
        const period = Math.round(1 / validationFraction);
        const expected = referenceShards(documents, shardBytes, period);
        expect(train.length).toBe(expected.train.length);
        expect(train.length).toBeGreaterThan(shardBytes === MIN_SHARD_BYTES ? 20 : 5);
        expect(validation.length).toBe(expected.validation.length);
        for (const [i, bytes] of train.entries())
          expect(bytes.equals(expected.train[i] as Uint8Array), `train ${i}`).toBe(true);
        for (const [i, bytes] of validation.entries()) {
          expect(bytes.equals(expected.validation[i] as Uint8Array), `validation ${i}`).toBe(true);
        }
        expect(loaded.manifest).toMatchObject({
          name: 'corpus',
          sources: ['corpus', 'records.jsonl'],
          licence: 'CC0',
          shardBytes,
          pieceBytes: PIECE_BYTES,
          validationFraction,
          documents: documents.length,
        });
        expect(result).toEqual({
          shards: train.length + validation.length,
          bytes: loaded.manifest.bytes,
          validationShards: validation.length,
          manifest: join(outDir, MANIFEST_FILE),
          hash: loaded.hash,
          documents: documents.length,
          skippedLines: 0,
        });
        const last = progress.at(-1) as PackProgress;
        expect(last.bytesRead).toBe(last.totalBytes);
        expect(last.shards).toBe(result.shards);
        expect(progress.every((p, i) => i === 0 || p.bytesRead >= (progress[i - 1] as PackProgress).bytesRead)).toBe(
          true,
        );
      });
    }
  }

  it('packs the same input into the same manifest twice', async () => {
    const options = { shardBytes: MIN_SHARD_BYTES, validationFraction: 0.1, name: 'twice' };
    const first = await packDataset([corpusDir, jsonlPath], { ...options, outDir: join(root, 'twice-1') });
    const second = await packDataset([corpusDir, jsonlPath], { ...options, outDir: join(root, 'twice-2') });
    expect(second.hash).toBe(first.hash);
    expect(readFileSync(second.manifest).equals(readFileSync(first.manifest))).toBe(true);
  });

  it('refuses bad input with a message naming the file and where', async () => {
    const bad = join(root, 'bad');
    mkdirSync(bad);
    const file = (name: string, bytes: Uint8Array | string) => {
      writeFileSync(join(bad, name), bytes);
      return join(bad, name);
    };
    const out = join(root, 'bad-out');
    const pack = (inputs: string[], options = {}) =>
      packDataset(inputs, { outDir: out, shardBytes: MIN_SHARD_BYTES, ...options });
    const text = encoder.encode(gen.text(3_000_000));
    const cases: [string[], object, RegExp][] = [
      [
        [file('ff.txt', Buffer.concat([Buffer.alloc(1000, 0x61), Uint8Array.of(0xff), text]))],
        {},
        /ff\.txt is not UTF-8 at byte 1000$/,
      ],
      [
        // a 3-byte character cut short exactly where the first 1 MiB read ends
        [file('straddle.txt', Buffer.concat([Buffer.alloc(1024 * 1024 - 1, 0x61), Uint8Array.of(0xe6, 0x61)]))],
        {},
        /straddle\.txt is not UTF-8 at byte 1048575$/,
      ],
      [
        [file('short.txt', Uint8Array.of(0x61, 0x62, 0x63, 0xe6, 0xbc))],
        {},
        /short\.txt is not UTF-8: it ends inside a character at byte 3$/,
      ],
      [
        [
          file(
            'crlf.jsonl',
            Buffer.concat([Buffer.from('{"text":"a"}\r\n{"text":"b"}\r\n{"text":"'), Buffer.of(0xff, 0x22, 0x7d)]),
          ),
        ],
        {},
        /crlf\.jsonl:3 is not UTF-8 at byte 37$/,
      ],
      [[file('empty.txt', '')], {}, /empty\.txt holds no text$/],
      [
        [file('small.txt', 'a few words')],
        { validationFraction: 0.05 },
        /packs into 1 pieces; a validation split needs at least 20 pieces of 64 KiB/,
      ],
      [[jsonlPath], { validationFraction: 0 }, /validation fraction of 0 leaves no validation split/],
      [[file('meta.json', '{}')], {}, /meta\.json is JSON, not JSON Lines/],
      [[join(bad, 'missing.txt')], {}, /cannot read input .*missing\.txt: ENOENT/],
      [[jsonlPath], { shardBytes: 1000 }, /a shard holds 65536–1073741824 bytes, not 1000/],
      [[jsonlPath], { textField: 'body' }, /records\.jsonl:1 has no string "body" field$/],
      [
        [jsonlPath],
        { openForWrite: () => open('/dev/full', 'w') },
        /the disk holding .*bad-out is full after writing 0 bytes$/,
      ],
    ];
    for (const [inputs, options, message] of cases) {
      await expect(pack(inputs, options), String(message)).rejects.toThrow(message);
      expect(readdirSync(out), `${message}: nothing left behind`).toEqual([]);
    }

    const lines = [
      JSON.stringify({ text: gen.text(2_000_000) }),
      '{"text": "cut',
      JSON.stringify({ body: 'x' }),
      '[1]',
      JSON.stringify({ text: 'é' }),
    ];
    const jsonl = file('broken.jsonl', lines.join('\n'));
    await expect(pack([jsonl])).rejects.toThrow(/broken\.jsonl:2 is not JSON \(/);
    const skipping = await pack([jsonl], { skipBadLines: true });
    expect(skipping).toMatchObject({ skippedLines: 3, documents: 2 });

    // a folder that already holds a dataset: refused, and left as it was, unless overwrite
    const manifest = readFileSync(skipping.manifest);
    await expect(pack([jsonl])).rejects.toThrow(/bad-out already holds a dataset \(manifest\.json\)/);
    expect(readFileSync(skipping.manifest).equals(manifest)).toBe(true);
    const again = await pack([jsonl], { skipBadLines: true, overwrite: true });
    expect(again.hash).toBe(skipping.hash);
  });
});

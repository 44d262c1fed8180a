import { writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { corpusFingerprint, loadMobyDick, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import { createRunConfig } from '@shoal/room/run-config';
import type { Member } from '@shoal/swarm';
import { describe, expect, it } from 'vitest';
import { loadRoomCorpus } from './worker.ts';

// the mesh is not touched on these paths (fetching over it: packages/swarm corpus-share.test.ts)
const noMesh = {} as Member;

describe("a worker's corpus", () => {
  const text = loadMobyDick().subarray(0, 50_000);
  const config = (corpus: string, fingerprint?: string) => {
    const run = createRunConfig({ corpus });
    if (fingerprint) run.data.fingerprint = fingerprint;
    return run;
  };

  it('is the file given, checked against the fingerprint the host gave', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-corpus-'));
    const file = join(dir, 'room.txt');
    writeFileSync(file, text);
    const same = await loadRoomCorpus(config('room.txt', corpusFingerprint(text)), noMesh, 'host', file);
    expect(same).toMatchObject({ source: 'file', corpus: { fingerprint: corpusFingerprint(text) } });
    const other = join(dir, 'other.txt');
    writeFileSync(other, text.subarray(1));
    await expect(loadRoomCorpus(config('room.txt', corpusFingerprint(text)), noMesh, 'host', other)).rejects.toThrow(
      /trains on room\.txt \(fingerprint 50000:.*\); .*other\.txt is 49999:.*leave --data out to receive it/,
    );
    // an older host gives no fingerprint: the file is taken on trust, as before
    expect((await loadRoomCorpus(config('room.txt'), noMesh, 'host', other)).source).toBe('file');
  });

  it('is the bundled Moby Dick, and a room of another text needs the file or a fingerprint', async () => {
    const moby = await loadRoomCorpus(config('moby-dick', MOBY_DICK_FINGERPRINT), noMesh, 'host', undefined);
    expect(moby).toMatchObject({ source: 'moby-dick', corpus: { fingerprint: MOBY_DICK_FINGERPRINT } });
    await expect(loadRoomCorpus(config('moby-dick', '17:0badf00d'), noMesh, 'host', undefined)).rejects.toThrow(
      /fingerprint 17:0badf00d/,
    );
    await expect(loadRoomCorpus(config('notes.txt'), noMesh, 'host', undefined)).rejects.toThrow(
      /trains on notes\.txt: pass that file with --data/,
    );
  });
});

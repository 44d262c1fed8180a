/**
 * The dashboard's host runtime (room worker) in Node, its IndexedDB replaced by a map: the
 * checkpoint it saves and the files it hands the "weights + run state" download carry no room
 * credentials, and a record an older version wrote with the secret inside is rewritten without it.
 * (That it saves at every adopted round is RoomCheckpointSaver's, tested in @shoal/swarm.)
 */
import { corpusFromBytes, loadMobyDick } from '@shoal/data';
import { buildLayout, encodeState } from '@shoal/model';
import { decodeRoomCheckpoint, encodeRoomCheckpoint } from '@shoal/room';
import { createRunConfig } from '@shoal/room/run-config';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RoomFilesRecord } from './checkpoint-store.ts';
import { datasetFixture, FIXTURE_ORIGIN } from './dataset-fixture.ts';
import { type HostRuntime, startHost } from './host-runtime.ts';
import type { HostInit, RuntimeEvent, RuntimeOut } from './messages.ts';
import { openRoomDataset } from './packed-dataset.ts';
import { type NetIn, type NetOut, type PortLike, PortTransport } from './port-transport.ts';

const records = vi.hoisted(() => new Map<string, unknown>());
vi.mock('./checkpoint-store.ts', () => ({
  saveRoomFiles: async (roomId: string, files: unknown) => void records.set(`room-files:${roomId}`, files),
  loadRoomFiles: async (roomId: string) => records.get(`room-files:${roomId}`),
  saveRoomCorpus: async (roomId: string, corpus: unknown) => void records.set(`room-corpus:${roomId}`, corpus),
  loadRoomCorpus: async (roomId: string) => records.get(`room-corpus:${roomId}`),
}));

const ROOM = { roomId: 'r00m', hostSecret: 'host-secret-0123456789abcdef', joinToken: 'join-token-0123456789abcdef' };
const contains = (bytes: Uint8Array, text: string) => Buffer.from(bytes).includes(Buffer.from(text, 'utf8'));
const noPort: PortLike<NetIn, NetOut> = {
  postMessage: () => {},
  addEventListener: () => {},
  removeEventListener: () => {},
};

/** A room on an uploaded text (no fetch), nano, no volunteers: only the host's own state. */
function hostInit(resume: string | null): HostInit {
  const text = loadMobyDick().subarray(0, 100_000);
  const config = createRunConfig({ preset: 'nano', corpus: 'upload.txt', train: { batchSize: 2, seed: 1 } });
  config.data.fingerprint = corpusFromBytes(text, { name: 'upload.txt', seqLen: config.train.seqLen }).fingerprint;
  return {
    type: 'host',
    self: 'host-peer',
    room: ROOM,
    config: resume ? null : config,
    params: null,
    resume,
    scheduleSteps: null,
    status: 'waiting',
    corpusUrl: 'http://localhost/unused',
    origin: 'http://localhost',
    corpus: resume ? null : { name: 'upload.txt', bytes: text },
    history: null,
    evalEveryMs: 60_000,
    evalBatches: 1,
    viewEveryMs: 60_000,
    deadlineMs: 5_000,
  };
}

async function start(resume: string | null, init: HostInit = hostInit(resume)) {
  const events: RuntimeEvent[] = [];
  const post = (message: RuntimeOut) => {
    if ('type' in message) events.push(message); // not the mesh's `net` sends
  };
  const runtime = await startHost(init, new PortTransport('host-peer', noPort), post);
  running.push(runtime);
  /** The `count`-th event of `type`, once it came. */
  const next = async <T extends RuntimeEvent['type']>(type: T, count = 1) => {
    const ofType = () => events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === type);
    await vi.waitFor(() => expect(ofType().length).toBeGreaterThanOrEqual(count), { timeout: 10_000 });
    return ofType()[count - 1] as Extract<RuntimeEvent, { type: T }>;
  };
  return { runtime, next };
}

const running: HostRuntime[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((runtime) => runtime.close()));
  records.clear();
});

describe('the dashboard host’s checkpoints', () => {
  it('saves to IndexedDB and downloads θ_global + run state without the room’s credentials', async () => {
    const { runtime, next } = await start(null);
    await next('saved'); // the room as it starts
    const saved = records.get(`room-files:${ROOM.roomId}`) as RoomFilesRecord;
    runtime.handle({ type: 'files', id: 7 });
    const download = await next('files');
    expect(download).toMatchObject({ id: 7, roomId: ROOM.roomId });
    for (const [name, files] of Object.entries({ saved, download })) {
      for (const secret of [ROOM.hostSecret, ROOM.joinToken]) {
        expect(contains(files.state, secret), `${name}: run state`).toBe(false);
        expect(contains(files.weights, secret), `${name}: weights`).toBe(false);
      }
      expect(decodeRoomCheckpoint(files.weights, files.state).state.room).toBeNull();
    }

    // a status change saves the room as it stands
    runtime.handle({ type: 'status', status: 'paused' });
    await next('saved', 2);
  });

  it('resumes a record an older version wrote with the secret in its run state, and rewrites it without', async () => {
    const first = await start(null);
    await first.next('saved');
    await first.runtime.close();
    const files = records.get(`room-files:${ROOM.roomId}`) as RoomFilesRecord;
    const checkpoint = decodeRoomCheckpoint(files.weights, files.state);
    const legacyState = encodeState(
      buildLayout(checkpoint.state.config.model),
      { 'outer.m': checkpoint.momentum },
      { ...checkpoint.state, room: ROOM },
    );
    records.set(`room-files:${ROOM.roomId}`, { ...files, state: legacyState });
    expect(contains(legacyState, ROOM.hostSecret)).toBe(true);

    const resumed = await start(ROOM.roomId);
    expect((await resumed.next('resumed')).checkpoint.fragments).toEqual(checkpoint.state.fragments);
    await resumed.next('saved');
    const rewritten = records.get(`room-files:${ROOM.roomId}`) as RoomFilesRecord;
    expect(contains(rewritten.state, ROOM.hostSecret)).toBe(false);
    expect(contains(rewritten.state, ROOM.joinToken)).toBe(false);
    expect(encodeRoomCheckpoint(decodeRoomCheckpoint(rewritten.weights, rewritten.state)).state).toEqual(
      rewritten.state,
    );
  });
});

describe('training on from a finished room', () => {
  it('opens a new room from its checkpoint with a longer schedule; the finished room keeps its own', async () => {
    const first = await start(null);
    const { checkpoint: saved } = await first.next('saved');
    expect(saved.totalSteps).toBe(400);
    await first.runtime.close();
    const room = { ...ROOM, roomId: 'room-2' };
    const init: HostInit = { ...hostInit(ROOM.roomId), room, scheduleSteps: 800 };
    const { next } = await start(ROOM.roomId, init);
    expect((await next('resumed')).checkpoint.step).toBe(saved.step);
    // the new room's checkpoint is its own, with the longer schedule; its text moved with it
    expect((await next('saved')).checkpoint.totalSteps).toBe(800);
    const files = records.get('room-files:room-2') as RoomFilesRecord;
    expect(decodeRoomCheckpoint(files.weights, files.state).state.config.train.totalSteps).toBe(800);
    expect(records.has('room-corpus:room-2')).toBe(true);
    const old = records.get(`room-files:${ROOM.roomId}`) as RoomFilesRecord;
    expect(decodeRoomCheckpoint(old.weights, old.state).state.config.train.totalSteps).toBe(400);
  });
});

describe('a dashboard room on a packed dataset', () => {
  it('opens the dataset the config names on this origin, serves no text, and says what it trains on', async () => {
    const fixture = await datasetFixture();
    vi.stubGlobal('fetch', fixture.fetch);
    try {
      const { name, ref } = await openRoomDataset(fixture.path, FIXTURE_ORIGIN);
      const config = createRunConfig({ preset: 'nano', corpus: name, train: { batchSize: 2, seqLen: 32, seed: 1 } });
      config.data.dataset = ref;
      const init: HostInit = { ...hostInit(null), config, corpus: null, origin: FIXTURE_ORIGIN };
      const { next } = await start(null, init);
      const { dataset } = await next('dataset');
      expect(dataset).toMatchObject({ name, source: 'url', fingerprint: fixture.hash });
      expect(dataset.packed).toMatchObject({ manifest: fixture.hash, url: fixture.path, validationShards: 1 });
      await next('saved');
      // the validation shard was read for the evaluation batches; no training shard was
      const files = fixture.asked.map((url) => url.slice(url.lastIndexOf('/') + 1));
      expect(files).toContain('validation-00000.txt');
      expect(files.filter((file) => file.startsWith('train-'))).toEqual([]);
    } finally {
      vi.unstubAllGlobals();
      await fixture.remove();
    }
  });
});

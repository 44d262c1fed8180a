/**
 * The dashboard's checkpoints in IndexedDB (idb-keyval; works on the main thread and in the room
 * worker). Per room, three records:
 * - `room-link:<id>`: the signaling credentials, written by the main thread when the room is
 *   created (small: read on every load of /host/<id>). The only place the host secret is kept;
 * - `room-files:<id>`: the checkpoint pair (room-checkpoint.ts: θ_global safetensors + run state),
 *   written by the host worker at every round it adopts. The same files as the dashboard's
 *   download, so they carry no credentials (a record written by an older version may: the host
 *   rewrites it when the room resumes);
 * - `room-corpus:<id>`: the text the host uploaded for the room (none for Moby Dick rooms), so a
 *   reload serves the volunteers the same text.
 */

import type { RoomEnd, RoomStatus } from '@shoal/protocol';
import { createStore, del, get, keys, set, type UseStore } from 'idb-keyval';
import type { CheckpointInfo } from './messages.ts';

export interface RoomLinkRecord {
  roomId: string;
  hostSecret: string;
  joinToken: string;
  watchKey: string | null;
  createdAt: string;
  /** The room's status as the host last set it: a reload carries on from it. */
  status: RoomStatus;
  /** A stopped room: whether the host stopped it or its schedule ended (absent in older records). */
  endedBy?: RoomEnd;
}

export interface RoomFilesRecord {
  weights: Uint8Array;
  state: Uint8Array;
  info: CheckpointInfo;
}

export interface RoomCorpusRecord {
  name: string;
  bytes: Uint8Array;
  fingerprint: string;
}

let database: UseStore | null = null;
const db = () => {
  database ??= createStore('shoal', 'rooms');
  return database;
};

export const saveRoomLink = (link: RoomLinkRecord) => set(`room-link:${link.roomId}`, link, db());
export const loadRoomLink = (roomId: string) => get<RoomLinkRecord>(`room-link:${roomId}`, db());
export const saveRoomFiles = (roomId: string, files: RoomFilesRecord) => set(`room-files:${roomId}`, files, db());
export const loadRoomFiles = (roomId: string) => get<RoomFilesRecord>(`room-files:${roomId}`, db());
export const saveRoomCorpus = (roomId: string, corpus: RoomCorpusRecord) => set(`room-corpus:${roomId}`, corpus, db());
export const loadRoomCorpus = (roomId: string) => get<RoomCorpusRecord>(`room-corpus:${roomId}`, db());

/** Rooms this browser hosts, newest first, with their last checkpoint if any. */
export async function listRooms(): Promise<{ link: RoomLinkRecord; info: CheckpointInfo | null }[]> {
  const all = (await keys(db())).map(String).filter((key) => key.startsWith('room-link:'));
  const rooms = await Promise.all(
    all.map(async (key) => {
      const link = (await get<RoomLinkRecord>(key, db())) as RoomLinkRecord;
      const files = await loadRoomFiles(link.roomId);
      return { link, info: files?.info ?? null };
    }),
  );
  return rooms.sort((a, b) => b.link.createdAt.localeCompare(a.link.createdAt));
}

/**
 * The run of room `oldId` goes on in another room (`link`; the server had forgotten the old one):
 * its checkpoint and text move to the new id and the old record goes, so the room list shows
 * the run once.
 */
export async function replaceRoomLink(oldId: string, link: RoomLinkRecord): Promise<void> {
  if (oldId === link.roomId) return saveRoomLink(link);
  const [files, corpus] = await Promise.all([loadRoomFiles(oldId), loadRoomCorpus(oldId)]);
  if (files) await saveRoomFiles(link.roomId, files);
  if (corpus) await saveRoomCorpus(link.roomId, corpus);
  await saveRoomLink(link);
  await forgetRoom(oldId);
}

export async function forgetRoom(roomId: string): Promise<void> {
  await del(`room-link:${roomId}`, db());
  await del(`room-files:${roomId}`, db());
  await del(`room-corpus:${roomId}`, db());
}

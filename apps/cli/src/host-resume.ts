/**
 * What `shoal host` keeps to resume and how it resumes: with --checkpoint-dir, θ_global and the
 * run state at every round its replica adopts (checkpointStorage) and the room's credentials in a
 * file of their own beside them (CREDENTIALS_NAME), never in the checkpoint a host may share;
 * every file there is written 0600. With --resume, the checkpoint read back (a save a kill cut
 * short finished first), and the signaling room taken back while the server still has it.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { decodeRoomCheckpoint, type RoomCheckpoint } from '@shoal/room';
import type { HostStorage } from '@shoal/room/services';
import type { SignalClient } from '@shoal/signaling';
import { finishInterruptedWrite, readInput, writePrivateFiles } from './files.ts';
import type { HostPrint } from './host-events.ts';
import { UsageError } from './usage.ts';

export const CHECKPOINT_NAME = 'shoal-room.safetensors';
export const STATE_NAME = 'shoal-room.state.safetensors';
/** The signaling room's credentials, beside the checkpoint: what `--resume` takes the room back with. */
export const CREDENTIALS_NAME = 'room-credentials.json';
/** How long a resumed host waits for its room's seat while the server still sees the old host in it. */
const RECLAIM_WAIT_MS = 30_000;

/**
 * Takes the saved room back; null when the server no longer has it (or the secret is not its), so
 * a new room is the only way on. While the server still seats a host (a killed one whose socket it
 * has not seen close yet, or another process hosting it), this waits for the seat rather than
 * opening a second room beside the one its volunteers are in.
 */
export async function reclaimWhenFree(
  client: SignalClient,
  saved: { roomId: string; hostSecret: string },
): Promise<Awaited<ReturnType<SignalClient['reclaim']>> | null> {
  const deadline = Date.now() + RECLAIM_WAIT_MS;
  for (let wait = 500; ; wait = Math.min(2 * wait, 5_000)) {
    try {
      return await client.reclaim(saved.roomId, saved.hostSecret);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'no-such-room' || code === 'bad-secret') return null;
      if (code !== 'host-present' || Date.now() + wait > deadline) {
        throw new UsageError(`cannot take room ${saved.roomId} back: ${(error as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** Whoever holds these can act as the room's host: they live only in CREDENTIALS_NAME (0600). */
export interface RoomCredentials {
  roomId: string;
  hostSecret: string;
  joinToken: string;
  watchKey: string | null;
}

/** `--resume DIR` or `--resume DIR/NAME.safetensors` → the weights and run-state paths. */
export function resumePaths(resume: string): { weights: string; state: string } {
  let isDirectory = false;
  try {
    isDirectory = statSync(resume).isDirectory();
  } catch {
    // not there: readInput names it below
  }
  if (isDirectory) return { weights: join(resume, CHECKPOINT_NAME), state: join(resume, STATE_NAME) };
  return { weights: resume, state: `${resume.replace(/\.safetensors$/, '')}.state.safetensors` };
}

/**
 * The credentials saved beside a checkpoint, or null when there are none (a checkpoint copied
 * without them, or written before they had a file: its run state carries them instead).
 */
export function loadRoomCredentials(resume: string): RoomCredentials | null {
  const path = join(dirname(resumePaths(resume).weights), CREDENTIALS_NAME);
  if (!existsSync(path)) return null;
  let parsed: Partial<RoomCredentials>;
  try {
    parsed = JSON.parse(new TextDecoder().decode(readInput(path, 'room credentials')));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`cannot read room credentials ${path}: ${(error as Error).message}`);
  }
  const { roomId, hostSecret, joinToken, watchKey } = parsed;
  if (typeof roomId !== 'string' || typeof hostSecret !== 'string' || typeof joinToken !== 'string')
    throw new UsageError(`cannot read room credentials ${path}: it needs roomId, hostSecret and joinToken`);
  return { roomId, hostSecret, joinToken, watchKey: typeof watchKey === 'string' ? watchKey : null };
}

/** The checkpoint `shoal host --resume DIR` goes on from (a save a kill cut short is finished first). */
export function loadRoomCheckpoint(resume: string): RoomCheckpoint {
  const paths = resumePaths(resume);
  // a host killed between renaming its weights and its run state left the newer state beside
  finishInterruptedWrite([paths.weights, paths.state], (files) => {
    try {
      decodeRoomCheckpoint(files.get(paths.weights) as Uint8Array, files.get(paths.state) as Uint8Array);
      return true;
    } catch {
      return false;
    }
  });
  const weights = readInput(paths.weights, 'checkpoint');
  const state = readInput(paths.state, 'run state');
  try {
    return decodeRoomCheckpoint(weights, state);
  } catch (error) {
    throw new UsageError(`cannot resume from ${resume}: ${(error as Error).message}`);
  }
}

/** Writes the room's credentials into `checkpointDir` (made owner-only when this host creates it). */
export async function saveRoomCredentials(checkpointDir: string, credentials: RoomCredentials): Promise<void> {
  // owner-only when this host creates it (an existing directory keeps the mode its owner gave it)
  mkdirSync(checkpointDir, { recursive: true, mode: 0o700 });
  const bytes = new TextEncoder().encode(`${JSON.stringify(credentials, null, 2)}\n`);
  await writePrivateFiles([{ path: join(checkpointDir, CREDENTIALS_NAME), bytes }]);
}

/**
 * θ_global and the run state at every round the host's replica adopts, written beside and
 * renamed (a reader never sees half a file); the fragment hashes in the state tell a resume
 * whether the two are from the same save. Text mode names only the last one, on the way out
 * (`stopping`).
 */
export function checkpointStorage(checkpointDir: string, print: HostPrint, stopping: () => boolean): HostStorage {
  const checkpointPaths = { path: join(checkpointDir, CHECKPOINT_NAME), state: join(checkpointDir, STATE_NAME) };
  return {
    async save(files, checkpoint) {
      await writePrivateFiles([
        { path: checkpointPaths.path, bytes: files.weights },
        { path: checkpointPaths.state, bytes: files.state },
      ]);
      const { fragments } = checkpoint.state;
      print(
        { event: 'checkpoint', ...checkpointPaths, fragments },
        stopping() ? `checkpoint: ${checkpointPaths.path} (rounds ${fragments.map((f) => f.round).join(', ')})` : null,
      );
    },
  };
}

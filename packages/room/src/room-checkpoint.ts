/**
 * A room's checkpoint, as two safetensors files like `shoal train`'s (design: "Checkpoint"):
 * θ_global as weights (nanoGPT names, loadable anywhere), and the run state: the outer momentum
 * as the vector `outer.m` plus a `RoomRunState` (run config, each fragment's round and hash, the
 * room's tokens) in `__metadata__`. `shoal host --resume` and the dashboard (IndexedDB) both read
 * and write this pair, and the dashboard offers it for download.
 *
 * Neither file carries the signaling room's credentials (host secret, join token): a host shares
 * and downloads these files, and whoever holds the secret can take the room over. Each host keeps
 * them apart (`shoal host`: room-credentials.json, 0600; the dashboard: its own IndexedDB record).
 * A run state written before that split still reads, secret included, so that it resumes.
 */
import { buildLayout, CheckpointError, decodeState, decodeWeights, encodeState, encodeWeights } from '@shoal/model';
import { type RoomRunState, roomRunStateSchema } from '@shoal/protocol';
import type { Host } from '@shoal/swarm';

export interface RoomCheckpoint {
  params: Float32Array;
  momentum: Float32Array;
  state: RoomRunState;
}

/** θ_global, m and the run state of `host` now (a copy: the host goes on while it is written). */
export function roomCheckpointOf(host: Host, savedAt = new Date()): RoomCheckpoint {
  const size = buildLayout(host.config.model).size;
  const { coordinator } = host;
  return {
    params: host.params(),
    momentum: host.replica.state.momentum(new Float32Array(size)),
    state: {
      format: 'shoal-room',
      version: 1,
      config: host.config,
      fragments: host.fragmentStates().map(({ round, hash }) => ({ round, hash })),
      roomTokens: coordinator.roomTokens,
      step: coordinator.step(),
      members: coordinator.memberSteps(),
      committedRounds: coordinator.committedRounds,
      abortedRounds: coordinator.abortedRounds,
      room: null,
      ...(coordinator.ledger ? { data: coordinator.ledger.message() } : {}),
      savedAt: savedAt.toISOString(),
    },
  };
}

/** The two files' bytes. A state read from an older checkpoint loses its credentials here. */
export function encodeRoomCheckpoint(checkpoint: RoomCheckpoint): { weights: Uint8Array; state: Uint8Array } {
  const layout = buildLayout(checkpoint.state.config.model);
  const state: RoomRunState = { ...checkpoint.state, room: null };
  return {
    weights: encodeWeights(layout, checkpoint.params),
    state: encodeState(layout, { 'outer.m': checkpoint.momentum }, state),
  };
}

/**
 * Reads the pair back; throws CheckpointError naming what is wrong. The fragment hashes are
 * checked against the weights and momentum when the host starts from them (Host.create).
 */
export function decodeRoomCheckpoint(weights: Uint8Array, state: Uint8Array): RoomCheckpoint {
  const { config, params } = decodeWeights(weights);
  const decoded = decodeState(state, buildLayout(config), ['outer.m']);
  const parsed = roomRunStateSchema.safeParse(decoded.state);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CheckpointError(`run state is not a room's: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`);
  }
  const model = parsed.data.config.model;
  for (const key of ['nLayer', 'nHead', 'nEmbd', 'blockSize', 'vocabSize'] as const) {
    if (model[key] !== config[key])
      throw new CheckpointError(`run state's config has ${key} ${model[key]}, the weights ${config[key]}`);
  }
  return { params, momentum: decoded.vectors['outer.m'] as Float32Array, state: parsed.data };
}

/**
 * Writes a host's checkpoint each time its replica of θ_global moves: a round it adopted, or a
 * fragment it fetched, so a host killed at any moment loses at most the rounds whose write had
 * not finished (the rounds in flight). Writes never overlap and never hold up a round: a change
 * that lands while one is being written is written once more right after it, however many land.
 *
 * `write` gets a snapshot taken when its write starts; its failure goes to `onError` and the next
 * change tries again.
 */
export class RoomCheckpointSaver {
  private writing: Promise<void> | null = null;
  private again = false;
  /** The fragment hashes last handed to `write` ('' before the first). */
  private written = '';
  private readonly unsubscribe: (() => void)[];

  constructor(
    private readonly host: Host,
    private readonly write: (checkpoint: RoomCheckpoint) => Promise<void>,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    // Registered after the host's replica (Host.create), so these run once it has adopted the
    // commit or installed the fetched state; the hash check skips messages that moved nothing.
    const changed = () => this.request();
    this.unsubscribe = [host.member.on('commit', changed), host.member.on('state-transfer', changed)];
  }

  /** Writes when θ_global moved since the last write, or always with `force` (a status change, the exit). */
  request(force = false): void {
    if (!force && this.hashes() === this.written) return;
    if (this.writing) this.again = true;
    else this.writing = this.drain();
  }

  /** Resolves when no write is running or waiting (after the last one settled). */
  settled(): Promise<void> {
    return this.writing ?? Promise.resolve();
  }

  /** Stops following the host; a write in progress still finishes (`settled`). */
  close(): void {
    for (const off of this.unsubscribe) off();
  }

  private async drain(): Promise<void> {
    do {
      this.again = false;
      this.written = this.hashes();
      try {
        await this.write(roomCheckpointOf(this.host));
      } catch (error) {
        this.written = ''; // not on disk: the next change writes again
        this.onError(error);
      }
    } while (this.again);
    this.writing = null;
  }

  private hashes(): string {
    return this.host
      .fragmentStates()
      .map((f) => f.hash)
      .join();
  }
}

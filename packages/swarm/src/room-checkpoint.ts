/**
 * A room's checkpoint, as two safetensors files like `shoal train`'s (design: "Checkpoint"):
 * θ_global as weights (nanoGPT names, loadable anywhere), and the run state: the outer momentum
 * as the vector `outer.m` plus a `RoomRunState` (run config, each fragment's round and hash, the
 * room's tokens, the signaling room) in `__metadata__`. `shoal host --resume` and the dashboard
 * (IndexedDB) both read and write this pair.
 */
import { buildLayout, CheckpointError, decodeState, decodeWeights, encodeState, encodeWeights } from '@shoal/model';
import { type RoomRunState, roomRunStateSchema } from '@shoal/protocol';
import type { Host } from './host.ts';

export interface RoomCheckpoint {
  params: Float32Array;
  momentum: Float32Array;
  state: RoomRunState;
}

/** θ_global, m and the run state of `host` now. */
export function roomCheckpointOf(host: Host, room: RoomRunState['room'], savedAt = new Date()): RoomCheckpoint {
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
      committedRounds: coordinator.committedRounds,
      abortedRounds: coordinator.abortedRounds,
      room,
      savedAt: savedAt.toISOString(),
    },
  };
}

export function encodeRoomCheckpoint(checkpoint: RoomCheckpoint): { weights: Uint8Array; state: Uint8Array } {
  const layout = buildLayout(checkpoint.state.config.model);
  return {
    weights: encodeWeights(layout, checkpoint.params),
    state: encodeState(layout, { 'outer.m': checkpoint.momentum }, checkpoint.state),
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

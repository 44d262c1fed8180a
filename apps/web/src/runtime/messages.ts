/**
 * What the main thread and the room worker (room.worker.ts) say to each other. The worker runs
 * the swarm member: the host (coordinator + replica + evaluation + checkpoints) on the
 * dashboard, the training loop on the volunteer page. The main thread keeps the UI, signaling
 * and the WebRTC mesh; `net` messages (port-transport.ts) carry the mesh traffic.
 */
import type { RoomStatus, RoomViewGroup, RoomViewPlace, RunConfig } from '@shoal/protocol';
import type { RoomView } from '@shoal/room';
import type { NetIn, NetOut } from './port-transport.ts';

export interface RoomCredentials {
  roomId: string;
  hostSecret: string;
  joinToken: string;
}

export interface HostInit {
  type: 'host';
  /** This member's peer id (from the signaling server). */
  self: string;
  room: RoomCredentials;
  /** A new run: its config, and θ_global to start from (a checkpoint the host picked) or the seeded init. */
  config: RunConfig | null;
  params: Float32Array | null;
  /**
   * Resume the run saved in IndexedDB under this room id (config and params are then null). It
   * differs from room.roomId when the server had forgotten the room and a new one was opened.
   */
  resume: string | null;
  /**
   * A room that trains on from a finished one's checkpoint (`resume` names that room): the
   * schedule's new length, more than the saved step; the step, tokens and counters go on. Null:
   * the saved run's own schedule.
   */
  scheduleSteps: number | null;
  status: RoomStatus;
  /** Moby Dick's static file: the room's text unless the host uploaded one. */
  corpusUrl: string;
  /** This page's origin: a dataset on the room's own server (/datasets/NAME/) is read from it. */
  origin: string;
  /**
   * A text the host uploaded for a new room (config.data names it); the host serves it to the
   * volunteers over the mesh and keeps it in IndexedDB beside the checkpoints. Null: Moby Dick, or
   * a resumed room's own text.
   */
  corpus: { name: string; bytes: Uint8Array } | null;
  /**
   * A resumed room's view as the server kept it for watch links: the recorder goes on with its
   * time axis, chart, rounds, each peer's rounds and the room's tokens (viewHistoryOf), so nothing
   * goes back. Null: a new run, or no kept view.
   */
  history: RoomView | null;
  evalEveryMs: number;
  evalBatches: number;
  viewEveryMs: number;
  deadlineMs: number;
}

export interface VolunteerInit {
  type: 'volunteer';
  self: string;
  roomId: string;
  /** The host's peer id: the coordinator. */
  coordinator: string;
  backend: 'webgpu' | 'cpu';
  /** Moby Dick's static file; a room with another text gets it from the host over the mesh. */
  corpusUrl: string;
  /** This page's origin: a dataset on the room's own server (/datasets/NAME/) is read from it. */
  origin: string;
  /** MiB of dataset shards held at once in a dataset room; null: 4 × its largest training shard. */
  shardBudgetMib: number | null;
  /** Fraction of wall time the engine may be busy (0.1 … 1). */
  dutyCycle: number;
  statsEveryMs: number;
}

export type RuntimeIn = NetIn | RuntimeControl;

export type RuntimeControl =
  | HostInit
  | VolunteerInit
  /** Host: the room's status (waiting → running ⇄ paused → stopped). Volunteer: the host's status. */
  | { type: 'status'; status: RoomStatus }
  /** Volunteer: pause or resume locally (the button, a hidden tab). */
  | { type: 'pause'; paused: boolean }
  | { type: 'duty-cycle'; dutyCycle: number }
  /** Volunteer: stop after the step in progress, say leave to every peer. */
  | { type: 'leave' }
  /** Host: θ_global and the model config (sampling). */
  | { type: 'params'; id: number }
  /** Host: the checkpoint pair as files (download). */
  | { type: 'files'; id: number };

export interface VolunteerStats {
  /** This volunteer's peer id (the host's tables name it so). */
  peer: string;
  backend: 'webgpu' | 'cpu';
  adapter: string;
  /** connecting: until the host's welcome; waiting: the host has not pressed Start. */
  phase: 'connecting' | 'waiting' | 'training' | 'paused' | 'stopped';
  innerStep: number;
  tokens: number;
  loss: number | null;
  tokensPerSecond: number;
  contributions: number;
  merges: number;
  /** Rounds this replica adopted (committed rounds it followed). */
  roundsCommitted: number;
  bytesSent: number;
  bytesReceived: number;
  /** The share of time the engine may work (the volunteer's cap, 0.1 … 1). */
  dutyCycle: number;
  /** The share of wall time a step was in progress lately (BusyMeter); null before it is known or in a pipeline room. */
  busyFraction: number | null;
  /**
   * What Shoal holds for the room, bytes: the model's training state and activations
   * (modelMemoryBytes) and the text or shards held; null before the welcome and in a pipeline room.
   */
  memoryBytes: number | null;
  config: RunConfig | null;
  /** The room's text: null before the welcome names it; `received` < `bytes` while it arrives. */
  dataset: DatasetInfo | null;
  /** In a pipeline-parallel room: this volunteer's stage and its group; null otherwise. */
  pipeline: VolunteerPipeline | null;
  /** In a dataset room, once its dataset is open: the shard drawn from and the cache; null otherwise. */
  shards: VolunteerShards | null;
  /** Why the host leaves it out of rounds (the roster's reason: too slow, no channel to …); '' when it does not. */
  leftOut: string;
}

/** A volunteer's shards of a packed dataset. */
export interface VolunteerShards {
  /** The shard it draws from (DataFeed's ShardStart); null before the first batch. */
  current: { epoch: number; shard: number; from: number } | null;
  /** Shard bytes held when the current shard started, and the cache's budget. */
  heldBytes: number;
  budgetBytes: number;
  /** Shards fetched and accepted; refused (bytes not the manifest's); read from the cache. */
  fetched: number;
  refused: number;
  cacheHits: number;
}

/** A volunteer's part of a pipeline-parallel room, from the coordinator's latest roster. */
export interface VolunteerPipeline {
  /** S. */
  stages: number;
  /** Its group, stage and the blocks the stage holds; null until the coordinator places it. */
  place: RoomViewPlace | null;
  /** Its group: who holds each stage, and which stages wait for a volunteer; null while unplaced. */
  group: RoomViewGroup | null;
  /** Placed, and the engine of its stage is not built yet. */
  starting: boolean;
}

/** The room's text as a page shows it. */
export interface DatasetInfo {
  name: string;
  bytes: number;
  fingerprint: string;
  /**
   * 'server': Moby Dick's static file; 'host': a text the host serves over the mesh; 'url': a
   * packed dataset each volunteer fetches its own shards of.
   */
  source: 'server' | 'host' | 'url';
  received: number;
  /** A packed dataset (source 'url'): its manifest and shards; absent for a text. */
  packed?: PackedDatasetInfo;
}

/** A packed dataset as a page shows it (from the room's DatasetRef and its manifest). */
export interface PackedDatasetInfo {
  /** SHA-256 of manifest.json. */
  manifest: string;
  /** As the room names it: an http(s) URL or /datasets/NAME/ on the room's server. */
  url: string;
  trainShards: number;
  validationShards: number;
  largestShardBytes: number;
}

export interface CheckpointInfo {
  savedAt: string;
  step: number;
  tokens: number;
  fragments: { round: number; hash: string }[];
  /** The schedule's steps of the run it was saved from (absent in records of older versions). */
  totalSteps?: number;
}

export type RuntimeOut = NetOut | RuntimeEvent;

export type RuntimeEvent =
  /** Host: the room view since the previous one (points are a delta). */
  | { type: 'view'; update: RoomView; step: number }
  /** Host: a checkpoint was written to IndexedDB. */
  | { type: 'saved'; checkpoint: CheckpointInfo }
  /** Host: resumed from IndexedDB. */
  | { type: 'resumed'; checkpoint: CheckpointInfo }
  /** Host: the room's text is loaded (and served to volunteers who ask). */
  | { type: 'dataset'; dataset: DatasetInfo }
  /** The run is known: the mesh (on the page) refuses any message larger than this. */
  | { type: 'message-limit'; bytes: number }
  | { type: 'stats'; stats: VolunteerStats }
  | { type: 'params'; id: number; params: Float32Array; config: RunConfig; key: string }
  | { type: 'files'; id: number; weights: Uint8Array; state: Uint8Array; roomId: string }
  | { type: 'left' }
  /** fatal: the runtime cannot go on (no engine, a bad checkpoint). */
  | { type: 'error'; message: string; fatal: boolean };

/**
 * `shoal host --server URL`: creates a room on the signaling server and runs its host headless
 * (docs/design.md, "The host is a replica"): the coordinator plus a replica of θ_global on a
 * WebRTC mesh with every member the server announces, run by the host service that the dashboard
 * runs too (HostService, @shoal/room/services; this file is its Node shell). It evaluates
 * θ_global on fixed validation batches with a CPU engine, writes θ_global as safetensors, and prints the join link and the
 * read-only watch link, whose page gets the room view this host publishes to the server every
 * --publish-every-ms (RoomViewRecorder); with --json, one JSON line per event on stdout (see
 * HostEvent).
 *
 * With --checkpoint-dir it saves θ_global and the run state at every round its replica adopts
 * (RoomCheckpointSaver), so a host killed at any moment resumes having lost only the rounds in
 * flight; the room's credentials go to a file of their own beside them (CREDENTIALS_NAME), never
 * into the checkpoint a host may share. Every file there is written 0600.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { bitsPerByte } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { maxMessageBytesFor, type RunConfig, roomSummaryMessage, roomSummaryOf } from '@shoal/protocol';
import { decodeRoomCheckpoint, type RoomCheckpoint } from '@shoal/room';
import { type RunOptions, runConfigOf } from '@shoal/room/run-options';
import { type HostMetrics, HostService, type HostStorage, viewHistoryOf, wallTimers } from '@shoal/room/services';
import type { IceServer, SignalClient } from '@shoal/signaling';
import { readKeptView } from '@shoal/signaling';
import { type CoordinatorEvent, type DatasetServer, serveDataset } from '@shoal/swarm';
import { finishInterruptedWrite, readInput, writePrivateFiles } from './files.ts';
import { hostData } from './host-data.ts';
import {
  connectSignaling,
  describeReconnect,
  joinMesh,
  loadWrtc,
  reconnecting,
  serverBase,
  untilSignal,
} from './room.ts';
import { UsageError } from './usage.ts';

/** The run options (run-options.ts) and the host's own. */
export interface HostCliOptions extends RunOptions {
  server: string;
  data?: string;
  /** A packed dataset's URL or folder (`shoal data pack`). */
  dataset?: string;
  /** Validation bytes per evaluation of a dataset room. */
  evalBytes: number;
  checkpointDir?: string;
  /** A room checkpoint to continue: its directory, or its weights file. */
  resume?: string;
  evalEveryMs: number;
  evalBatches: number;
  metricsEveryMs: number;
  /** Sample the room view and publish it to the server's watchers this often. */
  publishEveryMs: number;
  deadlineMs: number;
  json?: boolean;
}

/** What `--json` prints, one object per line. */
export type HostEvent =
  | {
      event: 'room';
      roomId: string;
      joinToken: string;
      joinUrl: string;
      /** The read-only view (`/watch/ROOM?key=…`); null from a server that issues no watch key. */
      watchUrl: string | null;
    }
  | { event: 'peer-joined'; peer: string }
  | { event: 'peer-left'; peer: string; reason: string }
  | { event: 'round-committed'; fragment: number; round: number; participants: number; hash: string }
  | { event: 'round-aborted'; fragment: number; round: number; reason: string }
  /** The room's step reached the schedule's total steps: a last checkpoint follows, and the process exits 0. */
  | { event: 'ended'; reason: 'schedule'; step: number }
  /**
   * Every --metrics-every-ms, and after an evaluation of θ_global that moved. The losses are in
   * nats per byte-token; each has its bits per byte beside it (docs/bits-per-byte.md).
   */
  | ({ event: 'metrics' } & Omit<HostMetrics, 'members'> & {
        trainBitsPerByte: number | null;
        evalBitsPerByte: number | null;
      })
  | {
      event: 'checkpoint';
      path: string;
      state: string;
      /** The rounds and hashes it holds: each fragment's last round this host had adopted. */
      fragments: { round: number; hash: string }[];
    }
  | {
      event: 'resumed';
      from: string;
      fragments: { round: number; hash: string }[];
      roomTokens: number;
      /** The room's step at the save (an older checkpoint's: 0): the room goes on from it. */
      step: number;
      /** Whether the signaling room was taken back (false: a new room, a new join link). */
      reclaimed: boolean;
    }
  /** The signaling socket dropped, or came back (ReconnectState's kind). */
  | { event: 'signaling'; state: 'connected' | 'reconnecting' | 'gave-up' | 'closed' };

export const CHECKPOINT_NAME = 'shoal-room.safetensors';
export const STATE_NAME = 'shoal-room.state.safetensors';
/** The signaling room's credentials, beside the checkpoint: what `--resume` takes the room back with. */
export const CREDENTIALS_NAME = 'room-credentials.json';
/** Why `shoal host` stops when the learning-rate schedule ran out (it exits 0). */
const SCHEDULE_ENDED = 'the schedule ended (its last step reached)';

/** How long a resumed host waits for its room's seat while the server still sees the old host in it. */
const RECLAIM_WAIT_MS = 30_000;

/**
 * Takes the saved room back; null when the server no longer has it (or the secret is not its), so
 * a new room is the only way on. While the server still seats a host (a killed one whose socket it
 * has not seen close yet, or another process hosting it), this waits for the seat rather than
 * opening a second room beside the one its volunteers are in.
 */
async function reclaimWhenFree(
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
interface RoomCredentials {
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
function loadRoomCredentials(resume: string): RoomCredentials | null {
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

/** The room's run config from the command line's options (a UsageError when they do not fit). */
export function runConfigFrom(options: HostCliOptions): RunConfig {
  try {
    // moby-dick (every worker has it), or the file's name: workers pass the file with --data
    // or receive it from the host over the mesh, and check it against the fingerprint
    return runConfigOf(options, {
      corpus: options.data === undefined ? 'moby-dick' : basename(options.data),
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function hostCommand(options: HostCliOptions): Promise<void> {
  // A resumed run keeps its own config: the training options on the command line do not apply.
  const saved = options.resume ? loadRoomCheckpoint(options.resume) : null;
  const config = saved?.state.config ?? runConfigFrom(options);
  const base = serverBase(options.server);
  const { corpus, evalBatches, describe, dataset, note } = await hostData(options, config, saved, base);
  if (describe && !options.json) console.log(describe);
  if (note) console.error(`shoal: ${note}`);
  const wrtc = await loadWrtc();

  /** One JSON line with --json, else `text` (null: nothing, an event only --json readers want). */
  const print = (event: HostEvent, text: string | null) => {
    if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
    else if (text !== null) console.log(text);
  };
  const onEvent = (event: CoordinatorEvent) => {
    switch (event.event) {
      case 'peer-joined':
        return print({ event: 'peer-joined', peer: event.peer }, `+ ${event.peer} joined`);
      case 'peer-left':
        return print(
          { event: 'peer-left', peer: event.peer, reason: event.reason },
          `- ${event.peer} left (${event.reason})`,
        );
      case 'round-committed': {
        const { fragment, round, participants, hash } = event;
        return print(
          { event: 'round-committed', fragment, round, participants, hash },
          `fragment ${fragment} round ${round} committed by ${participants}: ${hash.slice(0, 16)}`,
        );
      }
      case 'round-aborted': {
        const { fragment, round, reason } = event;
        return print(
          { event: 'round-aborted', fragment, round, reason },
          `fragment ${fragment} round ${round} aborted: ${reason}`,
        );
      }
      default:
        return; // round-opened: not part of the contract
    }
  };

  // a checkpoint written before the credentials had a file of their own keeps them in its run
  // state: read there, never written back (the next save drops them)
  const savedRoom = options.resume ? (loadRoomCredentials(options.resume) ?? saved?.state.room ?? null) : null;
  const client = await connectSignaling(base);
  // A resumed host takes its signaling room back while the server still has it (members that
  // stayed keep their link); otherwise it opens a new room.
  let room: {
    roomId: string;
    peerId: string;
    hostSecret: string;
    joinToken: string;
    watchKey?: string;
    iceServers: IceServer[];
  };
  let peers: string[] = [];
  let reclaimed = false;
  const back = savedRoom ? await reclaimWhenFree(client, savedRoom) : null;
  if (back && savedRoom) {
    room = { ...back, hostSecret: savedRoom.hostSecret };
    peers = back.peers;
    reclaimed = true;
  } else {
    room = await client.create();
  }
  // from here on the room outlives the socket: a restarted server is reclaimed with the secret
  const signal = reconnecting(client, base, { role: 'host', roomId: room.roomId, hostSecret: room.hostSecret });
  signal.onState((state) => print({ event: 'signaling', state: state.kind }, `shoal: ${describeReconnect(state)}`));
  const checkpointDir = options.checkpointDir;
  if (checkpointDir) {
    // owner-only when this host creates it (an existing directory keeps the mode its owner gave it)
    mkdirSync(checkpointDir, { recursive: true, mode: 0o700 });
    const credentials: RoomCredentials = {
      roomId: room.roomId,
      hostSecret: room.hostSecret,
      joinToken: room.joinToken,
      watchKey: room.watchKey ?? null,
    };
    const bytes = new TextEncoder().encode(`${JSON.stringify(credentials, null, 2)}\n`);
    await writePrivateFiles([{ path: join(checkpointDir, CREDENTIALS_NAME), bytes }]);
  }
  const link = await joinMesh(signal, room, peers, wrtc);
  // no peer may make this host hold more than the run's largest legitimate message
  link.mesh.setMessageLimit(maxMessageBytesFor(config));
  // a dataset room's files, for volunteers whose URL fails or whose room has none ('mesh:'):
  // answering before the first welcome, so no volunteer waits on a request sent too early
  let datasetServer: DatasetServer | null = null;
  if (dataset) {
    try {
      datasetServer = await serveDataset(link.member, dataset.dataset, { source: dataset.source });
    } catch (error) {
      await link.close();
      throw new UsageError((error as Error).message);
    }
  }

  // θ_global and the run state at every round the host's replica adopts, written beside and
  // renamed (a reader never sees half a file); the fragment hashes in the state tell a resume
  // whether the two are from the same save. Text mode names only the last one, on the way out.
  const checkpointPaths = checkpointDir
    ? { path: join(checkpointDir, CHECKPOINT_NAME), state: join(checkpointDir, STATE_NAME) }
    : null;
  let stopping = false;
  const storage: HostStorage | null = checkpointPaths && {
    async save(files, checkpoint) {
      await writePrivateFiles([
        { path: checkpointPaths.path, bytes: files.weights },
        { path: checkpointPaths.state, bytes: files.state },
      ]);
      const { fragments } = checkpoint.state;
      print(
        { event: 'checkpoint', ...checkpointPaths, fragments },
        stopping ? `checkpoint: ${checkpointPaths.path} (rounds ${fragments.map((f) => f.round).join(', ')})` : null,
      );
    },
  };
  const printMetrics = () => {
    const { members, ...figures } = service.metrics();
    const { step, tokens, trainLoss, evalLoss, tokensPerSecond } = figures;
    const bits = (nats: number | null) => (nats === null ? null : bitsPerByte(nats));
    // "1.4203 bits/byte (0.9845 nats)": bits per byte first, as every loss is shown
    const shown = (nats: number | null) =>
      nats === null ? '—' : `${bitsPerByte(nats).toFixed(4)} bits/byte (${nats.toFixed(4)} nats)`;
    print(
      { event: 'metrics', ...figures, trainBitsPerByte: bits(trainLoss), evalBitsPerByte: bits(evalLoss) },
      `step ${step}  tokens ${tokens}  train ${shown(trainLoss)}  eval ${shown(evalLoss)}  ` +
        `${tokensPerSecond.toFixed(0)} tok/s  ${members} members`,
    );
  };
  let endSchedule = () => {};
  const scheduleEnded = new Promise<string>((resolve) => {
    endSchedule = () => resolve(SCHEDULE_ENDED);
  });
  let service: HostService;
  try {
    service = await HostService.create({
      member: link.member,
      config,
      corpus, // workers without the text (no --data) fetch it from here; none in a dataset room
      saved,
      deadlineMs: options.deadlineMs,
      unreachableHint: room.iceServers.some((server) => [server.urls].flat().some((url) => /^turns?:/.test(url)))
        ? ''
        : ' (ICE failed and no TURN server is configured: see docs/turn.md)',
      roomId: room.roomId,
      hostKind: 'cli',
      status: 'running',
      // evaluation of θ_global: one CPU engine, parameters swapped in for each evaluation
      createEvaluator: (run, params) => new CpuTrainer(run.model, run.train, params),
      evalBatches,
      evalEveryMs: options.evalEveryMs,
      publishEveryMs: options.publishEveryMs,
      timers: wallTimers,
      storage,
      onEvent,
      // the watch link's view: one chart point and one publish per period (the server keeps the history)
      // and the room's figures for the volunteers' pages (the dashboard relays the same summary)
      onView: (update) => {
        // dropped while reconnecting: the next one carries on
        signal.publish(update);
        // not the last view of a host that is exiting (SIGINT, SIGTERM): its room goes on, and
        // `--resume` takes it back; volunteers take a relayed 'stopped' as the room's end
        if (!stopping) signal.relay(roomSummaryMessage(roomSummaryOf(update)));
      },
      onEvaluated: printMetrics,
      // the schedule's last step: a last checkpoint, then the process ends (volunteers are released)
      onEnded: () => endSchedule(),
      onError: (error, during) =>
        console.error(
          during === 'evaluation' ? 'shoal: evaluation failed:' : 'shoal: the checkpoint could not be written:',
          error,
        ),
    });
  } catch (error) {
    await link.close();
    const message = (error as Error).message;
    throw new UsageError(options.resume ? `cannot resume from ${options.resume}: ${message}` : message);
  }
  // The room line comes first (the --json contract), as soon as the room is known; then what was
  // resumed; then checkpoints and rounds.
  const joinUrl = `${base}/join/${room.roomId}?token=${room.joinToken}`;
  const watchUrl = room.watchKey ? `${base}/watch/${room.roomId}?key=${room.watchKey}` : null;
  print(
    { event: 'room', roomId: room.roomId, joinToken: room.joinToken, joinUrl, watchUrl },
    `room ${room.roomId}: join with\n  ${joinUrl}\n  shoal worker --server ${base} --room ${room.roomId} --token ${room.joinToken}` +
      (watchUrl ? `\nwatch (read-only) at\n  ${watchUrl}` : ''),
  );
  if (saved && options.resume) {
    const { fragments, roomTokens } = saved.state;
    const step = saved.state.step ?? 0;
    print(
      { event: 'resumed', from: options.resume, fragments, roomTokens, step, reclaimed },
      `resumed ${options.resume}: rounds ${fragments.map((f) => f.round).join(', ')}, step ${step}, ${roomTokens} tokens` +
        (reclaimed ? `, room ${room.roomId} taken back` : savedRoom ? ', its room is gone: a new one' : ''),
    );
  }

  // a room taken back goes on with the chart history the server kept for its watchers
  const key = reclaimed ? room.watchKey : undefined;
  const kept = key
    ? await connectSignaling(base)
        .then((watcher) => readKeptView(watcher, room.roomId, key))
        .catch(() => null) // the charts start afresh
    : null;
  service.start(kept && viewHistoryOf(kept));
  const metricsTimer = setInterval(printMetrics, options.metricsEveryMs);
  let refused = false;
  signal.on('error', (error) => {
    // a refused view is a bug here or a server with other limits: say it once, train on
    if (error.ref !== 'publish' || refused) return;
    refused = true;
    console.error(`shoal: the server refused the room view (${error.code}): ${error.message}`);
  });
  service.publish();

  const closedBy = await Promise.race([
    untilSignal(),
    scheduleEnded,
    new Promise<string>((resolve) =>
      signal.on('close', ({ reason }) => resolve(`the signaling server refused the room back: ${reason}`)),
    ),
  ]);
  clearInterval(metricsTimer);
  if (closedBy === SCHEDULE_ENDED) print({ event: 'ended', reason: 'schedule', step: service.roomStep() }, null);
  if (!options.json) console.error(`shoal: stopping (${closedBy})`);
  // a last checkpoint and a last view (best effort: the socket may already be gone); nothing
  // here waits on the server, and the mesh and the socket close within a bounded grace (room.ts)
  stopping = true;
  datasetServer?.stop();
  await service.stop();
  await link.close();
  if (!closedBy.startsWith('SIG') && closedBy !== SCHEDULE_ENDED) throw new Error(closedBy);
}

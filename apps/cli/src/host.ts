/**
 * `shoal host --server URL`: creates a room on the signaling server and runs its host headless
 * (docs/design.md, "The host is a replica"): the coordinator plus a replica of θ_global on a
 * WebRTC mesh with every member the server announces, run by the host service that the dashboard
 * runs too (HostService, @shoal/room/services; this file is its Node shell). It evaluates
 * θ_global on fixed validation batches with a CPU engine, writes θ_global as safetensors, and prints the join link and the
 * read-only watch link, whose page gets the room view this host publishes to the server every
 * --publish-every-ms (RoomViewRecorder); with --json, one JSON line per event on stdout (see
 * HostEvent, host-events.ts).
 *
 * With --checkpoint-dir it saves θ_global and the run state at every round its replica adopts
 * (RoomCheckpointSaver), so a host killed at any moment resumes having lost only the rounds in
 * flight; host-resume.ts writes those files, the room's credentials beside them, and reads them
 * back for --resume.
 */
import { basename } from 'node:path';
import { CpuTrainer } from '@shoal/model';
import { maxMessageBytesFor, type RunConfig, roomSummaryMessage, roomSummaryOf } from '@shoal/protocol';
import type { RoomCheckpoint } from '@shoal/room';
import { type RunOptions, runConfigOf } from '@shoal/room/run-options';
import { HostService, type HostStorage, viewHistoryOf, wallTimers } from '@shoal/room/services';
import type { IceServer, ReconnectingSignal } from '@shoal/signaling';
import { readKeptView } from '@shoal/signaling';
import { type DatasetServer, serveDataset } from '@shoal/swarm';
import { hostData } from './host-data.ts';
import { type HostPrint, hostPrinter, printCoordinatorEvent, printMetrics } from './host-events.ts';
import {
  checkpointStorage,
  loadRoomCheckpoint,
  loadRoomCredentials,
  reclaimWhenFree,
  saveRoomCredentials,
} from './host-resume.ts';
import {
  connectSignaling,
  describeReconnect,
  joinMesh,
  loadWrtc,
  type RoomLink,
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

/** Why `shoal host` stops when the learning-rate schedule ran out (it exits 0). */
const SCHEDULE_ENDED = 'the schedule ended (its last step reached)';

/** The signaling room a host runs. */
interface HostedRoom {
  roomId: string;
  peerId: string;
  hostSecret: string;
  joinToken: string;
  watchKey?: string;
  iceServers: IceServer[];
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

/**
 * The host's signaling room: a resumed host takes its room back while the server still has it
 * (members that stayed keep their link); otherwise it opens a new room. From here on the room
 * outlives the socket: a restarted server is reclaimed with the secret.
 */
async function openRoom(
  base: string,
  savedRoom: { roomId: string; hostSecret: string } | null,
  print: HostPrint,
): Promise<{ room: HostedRoom; peers: string[]; reclaimed: boolean; signal: ReconnectingSignal }> {
  const client = await connectSignaling(base);
  let room: HostedRoom;
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
  const signal = reconnecting(client, base, { role: 'host', roomId: room.roomId, hostSecret: room.hostSecret });
  signal.onState((state) => print({ event: 'signaling', state: state.kind }, `shoal: ${describeReconnect(state)}`));
  return { room, peers, reclaimed, signal };
}

/** What the host service of `shoal host` is made of. */
interface HostServiceParts {
  options: HostCliOptions;
  config: RunConfig;
  corpus: Awaited<ReturnType<typeof hostData>>['corpus'];
  evalBatches: Awaited<ReturnType<typeof hostData>>['evalBatches'];
  saved: RoomCheckpoint | null;
  link: RoomLink;
  room: HostedRoom;
  signal: ReconnectingSignal;
  storage: HostStorage | null;
  print: HostPrint;
  /** Whether the host is on its way out. */
  stopping: () => boolean;
  /** The schedule's last step was reached. */
  onEnded: () => void;
}

/** The host service (HostService) `shoal host` runs, its views published to the server. */
async function createHostService(parts: HostServiceParts): Promise<HostService> {
  const { options, link, room, signal, print, stopping } = parts;
  let service: HostService;
  try {
    service = await HostService.create({
      member: link.member,
      config: parts.config,
      corpus: parts.corpus, // workers without the text (no --data) fetch it from here; none in a dataset room
      saved: parts.saved,
      deadlineMs: options.deadlineMs,
      unreachableHint: room.iceServers.some((server) => [server.urls].flat().some((url) => /^turns?:/.test(url)))
        ? ''
        : ' (ICE failed and no TURN server is configured: see docs/turn.md)',
      roomId: room.roomId,
      hostKind: 'cli',
      status: 'running',
      // evaluation of θ_global: one CPU engine, parameters swapped in for each evaluation
      createEvaluator: (run, params) => new CpuTrainer(run.model, run.train, params),
      evalBatches: parts.evalBatches,
      evalEveryMs: options.evalEveryMs,
      publishEveryMs: options.publishEveryMs,
      timers: wallTimers,
      storage: parts.storage,
      onEvent: (event) => printCoordinatorEvent(print, event),
      // the watch link's view: one chart point and one publish per period (the server keeps the history)
      // and the room's figures for the volunteers' pages (the dashboard relays the same summary)
      onView: (update) => {
        // dropped while reconnecting: the next one carries on
        signal.publish(update);
        // not the last view of a host that is exiting (SIGINT, SIGTERM): its room goes on, and
        // `--resume` takes it back; volunteers take a relayed 'stopped' as the room's end
        if (!stopping()) signal.relay(roomSummaryMessage(roomSummaryOf(update)));
      },
      onEvaluated: () => printMetrics(print, service.metrics()),
      // the schedule's last step: a last checkpoint, then the process ends (volunteers are released)
      onEnded: parts.onEnded,
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
  return service;
}

/**
 * The room line comes first (the --json contract), as soon as the room is known; then what was
 * resumed; then checkpoints and rounds.
 */
function printRoom(
  print: HostPrint,
  base: string,
  room: HostedRoom,
  resumed: { from: string; saved: RoomCheckpoint; reclaimed: boolean; hadRoom: boolean } | null,
): void {
  const joinUrl = `${base}/join/${room.roomId}?token=${room.joinToken}`;
  const watchUrl = room.watchKey ? `${base}/watch/${room.roomId}?key=${room.watchKey}` : null;
  print(
    { event: 'room', roomId: room.roomId, joinToken: room.joinToken, joinUrl, watchUrl },
    `room ${room.roomId}: join with\n  ${joinUrl}\n  shoal worker --server ${base} --room ${room.roomId} --token ${room.joinToken}` +
      (watchUrl ? `\nwatch (read-only) at\n  ${watchUrl}` : ''),
  );
  if (resumed) {
    const { from, saved, reclaimed } = resumed;
    const { fragments, roomTokens } = saved.state;
    const step = saved.state.step ?? 0;
    print(
      { event: 'resumed', from, fragments, roomTokens, step, reclaimed },
      `resumed ${from}: rounds ${fragments.map((f) => f.round).join(', ')}, step ${step}, ${roomTokens} tokens` +
        (reclaimed ? `, room ${room.roomId} taken back` : resumed.hadRoom ? ', its room is gone: a new one' : ''),
    );
  }
}

/**
 * A dataset room's files, for volunteers whose URL fails or whose room has none ('mesh:'):
 * answering before the first welcome, so no volunteer waits on a request sent too early.
 */
async function serveRoomDataset(
  link: RoomLink,
  dataset: Awaited<ReturnType<typeof hostData>>['dataset'],
): Promise<DatasetServer | null> {
  if (!dataset) return null;
  try {
    return await serveDataset(link.member, dataset.dataset, { source: dataset.source });
  } catch (error) {
    await link.close();
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
  const print = hostPrinter(options.json);

  // a checkpoint written before the credentials had a file of their own keeps them in its run
  // state: read there, never written back (the next save drops them)
  const savedRoom = options.resume ? (loadRoomCredentials(options.resume) ?? saved?.state.room ?? null) : null;
  const { room, peers, reclaimed, signal } = await openRoom(base, savedRoom, print);
  const checkpointDir = options.checkpointDir;
  if (checkpointDir) {
    const { roomId, hostSecret, joinToken } = room;
    await saveRoomCredentials(checkpointDir, { roomId, hostSecret, joinToken, watchKey: room.watchKey ?? null });
  }
  const link = await joinMesh(signal, room, peers, wrtc);
  // no peer may make this host hold more than the run's largest legitimate message
  link.mesh.setMessageLimit(maxMessageBytesFor(config));
  const datasetServer = await serveRoomDataset(link, dataset);

  let stopping = false;
  const storage = checkpointDir ? checkpointStorage(checkpointDir, print, () => stopping) : null;
  let endSchedule = () => {};
  const scheduleEnded = new Promise<string>((resolve) => {
    endSchedule = () => resolve(SCHEDULE_ENDED);
  });
  const service = await createHostService({
    ...{ options, config, corpus, evalBatches, saved, link, room, signal, storage, print },
    stopping: () => stopping,
    onEnded: () => endSchedule(),
  });
  const resumed = saved && options.resume ? { from: options.resume, saved, reclaimed, hadRoom: !!savedRoom } : null;
  printRoom(print, base, room, resumed);

  // a room taken back goes on with the chart history the server kept for its watchers
  const key = reclaimed ? room.watchKey : undefined;
  const kept = key
    ? await connectSignaling(base)
        .then((watcher) => readKeptView(watcher, room.roomId, key))
        .catch(() => null) // the charts start afresh
    : null;
  service.start(kept && viewHistoryOf(kept));
  const metricsTimer = setInterval(() => printMetrics(print, service.metrics()), options.metricsEveryMs);
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

/**
 * `shoal host --server URL`: creates a room on the signaling server and runs its host headless
 * (ARCHITECTURE.md, "The host is a replica"): the coordinator plus a replica of θ_global on a
 * WebRTC mesh with every member the server announces. It evaluates θ_global on fixed validation
 * batches with a CPU engine, writes θ_global as safetensors, and prints the join link and the
 * read-only watch link, whose page gets the room view this host publishes to the server every
 * --publish-every-ms (RoomViewRecorder); with --json, one JSON line per event on stdout (see
 * HostEvent).
 */
import { mkdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type Batch, loadCorpus, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { readKeptView } from '@shoal/server/signal-client';
import type { IceServer } from '@shoal/server/signal-messages';
import {
  type CoordinatorEvent,
  createRunConfig,
  decodeRoomCheckpoint,
  encodeRoomCheckpoint,
  Host,
  type RoomCheckpoint,
  RoomViewRecorder,
  roomCheckpointOf,
  serveCorpus,
} from '@shoal/swarm';
import { readInput, writeAtomically } from './files.ts';
import { connectSignaling, joinMesh, loadWrtc, serverBase, untilSignal } from './room.ts';
import { codecOption, presetOption, UsageError } from './usage.ts';

export interface HostCliOptions {
  server: string;
  preset: string;
  innerSteps: number;
  fragments: number;
  overlap: number;
  alpha: number;
  codec: string;
  lr: number;
  batch: number;
  steps: number;
  seed: number;
  data?: string;
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
  | {
      event: 'metrics';
      step: number;
      tokens: number;
      trainLoss: number | null;
      evalLoss: number | null;
      tokensPerSecond: number;
      bytesSent: number;
      bytesReceived: number;
    }
  | { event: 'checkpoint'; path: string; state: string }
  | {
      event: 'resumed';
      from: string;
      fragments: { round: number; hash: string }[];
      roomTokens: number;
      /** Whether the signaling room was taken back (false: a new room, a new join link). */
      reclaimed: boolean;
    };

export const CHECKPOINT_NAME = 'shoal-room.safetensors';
export const STATE_NAME = 'shoal-room.state.safetensors';

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

function loadRoomCheckpoint(resume: string): RoomCheckpoint {
  const paths = resumePaths(resume);
  const weights = readInput(paths.weights, 'checkpoint');
  const state = readInput(paths.state, 'run state');
  try {
    return decodeRoomCheckpoint(weights, state);
  } catch (error) {
    throw new UsageError(`cannot resume from ${resume}: ${(error as Error).message}`);
  }
}

function runConfigFrom(options: HostCliOptions): RunConfig {
  const model = presetOption(options.preset);
  const codec = codecOption(options.codec);
  if (!(options.alpha >= 0 && options.alpha <= 1)) throw new UsageError(`--alpha must lie in [0, 1]`);
  if (!(options.lr > 0)) throw new UsageError('--lr must be > 0');
  try {
    return createRunConfig({
      model,
      train: { batchSize: options.batch, maxLr: options.lr, totalSteps: options.steps, seed: options.seed },
      diloco: {
        innerSteps: options.innerSteps,
        fragments: options.fragments,
        overlap: options.overlap,
        alpha: options.alpha,
        codec,
      },
      // moby-dick (every worker has it), or the file's name: workers pass the file with --data
      // or receive it from the host over the mesh, and check it against the fingerprint
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
  let corpus: ReturnType<typeof loadCorpus>;
  try {
    corpus = loadCorpus({ data: options.data, seqLen: config.train.seqLen });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { fingerprint } = config.data;
  if (fingerprint !== undefined && fingerprint !== corpus.fingerprint) {
    throw new UsageError(
      `the run trains on ${config.data.corpus} (fingerprint ${fingerprint}), ${corpus.name} is ${corpus.fingerprint}: pass the same --data`,
    );
  }
  // a run saved before fingerprints keeps its config as it was
  if (!saved) config.data.fingerprint = corpus.fingerprint;
  const evalBatches: Batch[] = validationBatches(corpus.validation, {
    batchSize: config.train.batchSize,
    seqLen: config.train.seqLen,
    count: options.evalBatches,
  });
  const wrtc = await loadWrtc();

  const print = (event: HostEvent, text: string) => {
    if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
    else console.log(text);
  };
  // The room view: created with the host below; the coordinator's events reach it from the start.
  let recorder: RoomViewRecorder | null = null;
  const onEvent = (event: CoordinatorEvent) => {
    recorder?.onEvent(event);
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

  const signal = await connectSignaling(base);
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
  const savedRoom = saved?.state.room;
  try {
    if (!savedRoom) throw new Error('no room to take back');
    const back = await signal.reclaim(savedRoom.roomId, savedRoom.hostSecret);
    room = { ...back, hostSecret: savedRoom.hostSecret };
    peers = back.peers;
    reclaimed = true;
  } catch {
    room = await signal.create();
  }
  const link = await joinMesh(signal, room, peers, wrtc);
  // workers without the text (no --data) fetch it from here
  serveCorpus(link.member, corpus.bytes);
  let host: Host;
  try {
    host = await Host.create({
      member: link.member,
      config,
      onEvent,
      deadlineMs: options.deadlineMs,
      unreachableHint: room.iceServers.some((server) => [server.urls].flat().some((url) => /^turns?:/.test(url)))
        ? ''
        : ' (ICE failed and no TURN server is configured: see the README on coturn)',
      ...(saved && { params: saved.params, momentum: saved.momentum, resume: saved.state }),
    });
  } catch (error) {
    await link.close();
    throw new UsageError(`cannot resume from ${options.resume}: ${(error as Error).message}`);
  }
  // a room taken back goes on with the chart history the server kept for its watchers
  const key = reclaimed ? room.watchKey : undefined;
  const kept = key
    ? await connectSignaling(base)
        .then((watcher) => readKeptView(watcher, room.roomId, key))
        .catch(() => null) // the charts start afresh
    : null;
  recorder = new RoomViewRecorder({
    host,
    roomId: room.roomId,
    hostKind: 'cli',
    ...(kept && { startedAt: kept.startedAt, continueFrom: kept.points.at(-1) ?? null }),
  });
  recorder.setStatus('running');
  const joinUrl = `${base}/join/${room.roomId}?token=${room.joinToken}`;
  const watchUrl = room.watchKey ? `${base}/watch/${room.roomId}?key=${room.watchKey}` : null;
  print(
    { event: 'room', roomId: room.roomId, joinToken: room.joinToken, joinUrl, watchUrl },
    `room ${room.roomId}: join with\n  ${joinUrl}\n  shoal worker --server ${base} --room ${room.roomId} --token ${room.joinToken}` +
      (watchUrl ? `\nwatch (read-only) at\n  ${watchUrl}` : ''),
  );

  // The room line comes first (the --json contract); then what was resumed.
  if (saved && options.resume) {
    const { fragments, roomTokens } = saved.state;
    print(
      { event: 'resumed', from: options.resume, fragments, roomTokens, reclaimed },
      `resumed ${options.resume}: rounds ${fragments.map((f) => f.round).join(', ')}, ${roomTokens} tokens` +
        (reclaimed ? `, room ${room.roomId} taken back` : savedRoom ? ', its room is gone: a new one' : ''),
    );
  }

  // Evaluation of θ_global: one CPU engine, parameters swapped in for each evaluation.
  const evaluator = new CpuTrainer(config.model, config.train, host.params());
  let evalLoss: number | null = null;
  let lastEvaluatedHashes = '';
  const roomCredentials = { roomId: room.roomId, hostSecret: room.hostSecret, joinToken: room.joinToken };
  // θ_global and the run state, each written beside and renamed (a reader never sees half a file);
  // the fragment hashes in the state tell a resume whether the two are from the same save.
  const writeCheckpoint = () => {
    if (!options.checkpointDir) return;
    mkdirSync(options.checkpointDir, { recursive: true });
    const files = encodeRoomCheckpoint(roomCheckpointOf(host, roomCredentials));
    const path = join(options.checkpointDir, CHECKPOINT_NAME);
    const state = join(options.checkpointDir, STATE_NAME);
    writeAtomically(path, files.weights);
    writeAtomically(state, files.state);
    print({ event: 'checkpoint', path, state }, `checkpoint: ${path}`);
  };
  const evaluate = async () => {
    const hashes = host
      .fragmentStates()
      .map((f) => f.hash)
      .join();
    if (hashes === lastEvaluatedHashes && evalLoss !== null) return false; // θ_global has not moved
    lastEvaluatedHashes = hashes;
    const params = host.params();
    await evaluator.setParams(params);
    const loss = await evaluator.evaluate(evalBatches);
    evalLoss = Number.isFinite(loss) ? loss : null;
    recorder?.setEvalLoss(evalLoss);
    writeCheckpoint();
    return true;
  };
  const metrics = () => {
    const { coordinator } = host;
    const members = [...coordinator.members.values()];
    const losses = members.map((m) => m.loss).filter((loss): loss is number => loss !== null);
    const trainLoss = losses.length === 0 ? null : losses.reduce((a, b) => a + b, 0) / losses.length;
    const tokensPerSecond = members.reduce((sum, m) => sum + m.tokensPerSecond, 0);
    const event = {
      event: 'metrics' as const,
      step: coordinator.medianStep,
      tokens: coordinator.roomTokens,
      trainLoss,
      evalLoss,
      tokensPerSecond,
      bytesSent: link.member.bytesSent,
      bytesReceived: link.member.bytesReceived,
    };
    print(
      event,
      `step ${event.step}  tokens ${event.tokens}  train ${trainLoss?.toFixed(4) ?? '—'}  eval ${evalLoss?.toFixed(4) ?? '—'}  ` +
        `${tokensPerSecond.toFixed(0)} tok/s  ${members.length} members`,
    );
  };

  let evaluating: Promise<unknown> = Promise.resolve();
  const evalTimer = setInterval(() => {
    evaluating = evaluating.then(evaluate).then(
      (changed) => changed && metrics(),
      (error) => console.error('shoal: evaluation failed:', error),
    );
  }, options.evalEveryMs);
  const metricsTimer = setInterval(metrics, options.metricsEveryMs);
  evaluating = evaluate().then(metrics);
  // The watch link's view: one chart point and one publish per period (the server keeps the history).
  const publish = () => {
    if (!recorder || !signal.open) return;
    recorder.sample();
    signal.publish(recorder.update());
  };
  const publishTimer = setInterval(publish, options.publishEveryMs);
  let refused = false;
  signal.on('error', (error) => {
    // a refused view is a bug here or a server with other limits: say it once, train on
    if (error.ref !== 'publish' || refused) return;
    refused = true;
    console.error(`shoal: the server refused the room view (${error.code}): ${error.message}`);
  });
  publish();

  const closedBy = await Promise.race([
    untilSignal(),
    new Promise<string>((resolve) =>
      signal.on('close', ({ code }) => resolve(`the signaling socket closed (${code})`)),
    ),
  ]);
  clearInterval(evalTimer);
  clearInterval(metricsTimer);
  clearInterval(publishTimer);
  await evaluating;
  // Best effort: watchers see the run stopped (the socket may already be gone).
  recorder.setStatus('stopped');
  publish();
  recorder.close();
  if (!options.json) console.error(`shoal: stopping (${closedBy})`);
  writeCheckpoint();
  evaluator.destroy();
  await link.close();
  if (!closedBy.startsWith('SIG')) throw new Error(closedBy);
}

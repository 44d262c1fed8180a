/**
 * The dashboard's host, inside the room worker (ARCHITECTURE.md, "The host is a replica"): the
 * coordinator and a replica of θ_global on the mesh, validation loss of θ_global on a CPU engine,
 * the room view for the charts and the watch link, and checkpoints in IndexedDB after committed
 * rounds. None of it runs on the main thread, so the dashboard stays responsive during rounds.
 */
import { type Batch, fetchCorpus, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { createWireCodec, type RoomStatus } from '@shoal/protocol';
import {
  type CoordinatorEvent,
  decodeRoomCheckpoint,
  encodeRoomCheckpoint,
  Host,
  Member,
  type RoomCheckpoint,
  RoomViewRecorder,
  roomCheckpointOf,
  runIdFor,
  wallClock,
} from '@shoal/swarm';
import { loadRoomFiles, saveRoomFiles } from './checkpoint-store.ts';
import type { CheckpointInfo, HostInit, RuntimeControl, RuntimeOut } from './messages.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface HostRuntime {
  handle(message: RuntimeControl): void;
}

/** The room's schedule position in inner steps: its tokens ÷ tokens per step (resume-stable). */
function roomStep(host: Host): number {
  const { batchSize, seqLen } = host.config.train;
  return Math.floor(host.coordinator.roomTokens / (batchSize * seqLen));
}

function infoOf(checkpoint: RoomCheckpoint): CheckpointInfo {
  const { state } = checkpoint;
  const { batchSize, seqLen } = state.config.train;
  return {
    savedAt: state.savedAt,
    step: Math.floor(state.roomTokens / (batchSize * seqLen)),
    tokens: state.roomTokens,
    fragments: state.fragments,
  };
}

export async function startHost(init: HostInit, transport: PortTransport, post: Post): Promise<HostRuntime> {
  let saved: RoomCheckpoint | null = null;
  if (init.resume) {
    const files = await loadRoomFiles(init.resume);
    if (!files) throw new Error(`no checkpoint of room ${init.resume} in this browser`);
    saved = decodeRoomCheckpoint(files.weights, files.state);
  }
  const config = saved?.state.config ?? init.config;
  if (!config) throw new Error('a new room needs a run config');

  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.room.roomId));
  let recorder: RoomViewRecorder | null = null;
  const early: CoordinatorEvent[] = [];
  const host = await Host.create({
    member,
    config,
    deadlineMs: init.deadlineMs,
    onEvent: (event) => (recorder ? recorder.onEvent(event) : early.push(event)),
    ...(saved
      ? { params: saved.params, momentum: saved.momentum, resume: saved.state }
      : init.params
        ? { params: init.params }
        : {}),
  });
  recorder = new RoomViewRecorder({ host, roomId: init.room.roomId, hostKind: 'dashboard' });
  for (const event of early) recorder.onEvent(event);
  let status: RoomStatus = init.status;
  const setStatus = (next: RoomStatus) => {
    status = next;
    host.coordinator.paused = next !== 'running';
    recorder?.setStatus(next);
    if (next === 'running') host.coordinator.maybeOpenRounds();
  };
  setStatus(status);
  transport.start();
  if (saved) post({ type: 'resumed', checkpoint: infoOf(saved) });

  // Validation batches of the room's corpus, and one CPU engine that θ_global is swapped into.
  const corpus = await fetchCorpus(init.corpusUrl, { seqLen: config.train.seqLen });
  const evalBatches: Batch[] = validationBatches(corpus.validation, {
    batchSize: config.train.batchSize,
    seqLen: config.train.seqLen,
    count: init.evalBatches,
  });
  const evaluator = new CpuTrainer(config.model, config.train, host.params());
  const hashes = () =>
    host
      .fragmentStates()
      .map((f) => f.hash)
      .join();
  let evaluatedHashes = '';
  let savedHashes = saved ? hashes() : '';
  let savedStatus = status;

  const evaluate = async () => {
    const now = hashes();
    if (now === evaluatedHashes) return;
    evaluatedHashes = now;
    await evaluator.setParams(host.params());
    const loss = await evaluator.evaluate(evalBatches);
    recorder?.setEvalLoss(Number.isFinite(loss) ? loss : null);
  };
  // After committed rounds (θ_global moved) and when the status changes (a paused room is saved
  // as it stands); one write at a time.
  const checkpoint = async () => {
    const now = hashes();
    if (now === savedHashes && status === savedStatus) return;
    savedHashes = now;
    savedStatus = status;
    const snapshot = roomCheckpointOf(host, init.room);
    const files = encodeRoomCheckpoint(snapshot);
    const info = infoOf(snapshot);
    await saveRoomFiles(init.room.roomId, { ...files, info });
    post({ type: 'saved', checkpoint: info });
  };

  let busy: Promise<void> = Promise.resolve();
  const chain = (work: () => Promise<void>) => {
    busy = busy.then(work).catch((error: unknown) => post({ type: 'error', message: String(error), fatal: false }));
  };
  chain(evaluate);
  setInterval(() => chain(evaluate), init.evalEveryMs);
  setInterval(() => chain(checkpoint), 1_000);
  setInterval(() => {
    if (!recorder) return;
    recorder.sample();
    post({ type: 'view', update: recorder.update(), step: roomStep(host) });
  }, init.viewEveryMs);

  return {
    handle(message) {
      switch (message.type) {
        case 'status':
          setStatus(message.status);
          chain(checkpoint);
          return;
        case 'params': {
          const params = host.params();
          // the fragment hashes name this θ_global (the sampler reuses its export while they hold)
          post({ type: 'params', id: message.id, params, config, key: hashes() }, [params.buffer]);
          return;
        }
        case 'files': {
          const files = encodeRoomCheckpoint(roomCheckpointOf(host, init.room));
          post({ type: 'files', id: message.id, ...files, roomId: init.room.roomId }, [
            files.weights.buffer,
            files.state.buffer,
          ]);
          return;
        }
        default:
          return;
      }
    },
  };
}

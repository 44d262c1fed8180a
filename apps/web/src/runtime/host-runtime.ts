/**
 * The dashboard's host, inside the room worker (ARCHITECTURE.md, "The host is a replica"): the
 * coordinator and a replica of θ_global on the mesh, validation loss of θ_global on a CPU engine,
 * the room view for the charts and the watch link, and checkpoints in IndexedDB at every round
 * the host's replica adopts (RoomCheckpointSaver: a closed or crashed tab loses at most the rounds
 * in flight). None of it runs on the main thread, so the dashboard stays responsive during rounds.
 * The checkpoint, in IndexedDB and downloaded, carries no credentials: the host secret stays in
 * the room's own record (checkpoint-store.ts), which the main thread keeps.
 */
import { type Batch, type Corpus, corpusFromBytes, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { createWireCodec, maxMessageBytesFor, type RoomStatus, type RunConfig } from '@shoal/protocol';
import {
  type CoordinatorEvent,
  decodeRoomCheckpoint,
  encodeRoomCheckpoint,
  Host,
  Member,
  type RoomCheckpoint,
  RoomCheckpointSaver,
  RoomViewRecorder,
  roomCheckpointOf,
  runIdFor,
  serveCorpus,
  wallClock,
} from '@shoal/swarm';
import { loadRoomCorpus, loadRoomFiles, saveRoomCorpus, saveRoomFiles } from './checkpoint-store.ts';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type { CheckpointInfo, DatasetInfo, HostInit, RuntimeControl, RuntimeOut } from './messages.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface HostRuntime {
  handle(message: RuntimeControl): void;
  /** Stops the timers and the checkpoints (a write in progress finishes); the room worker just ends. */
  close(): Promise<void>;
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

/**
 * The room's text: Moby Dick's static file, the host's upload (kept in IndexedDB for reloads), or
 * a resumed room's saved upload; checked against the run config.
 */
async function roomCorpus(
  init: HostInit,
  config: RunConfig,
): Promise<{ corpus: Corpus; source: DatasetInfo['source'] }> {
  const { corpus: name } = config.data;
  if (name === MOBY_DICK) return { corpus: await fetchMobyDick(init.corpusUrl, config), source: 'server' };
  const options = { name, seqLen: config.train.seqLen };
  if (init.corpus) {
    const corpus = checkCorpus(corpusFromBytes(init.corpus.bytes, options), config);
    await saveRoomCorpus(init.room.roomId, { name, bytes: corpus.bytes, fingerprint: corpus.fingerprint });
    return { corpus, source: 'host' };
  }
  const from = init.resume ?? init.room.roomId;
  const saved = await loadRoomCorpus(from);
  if (!saved) throw new Error(`this browser no longer holds ${name}, the text room ${from} trains on`);
  const corpus = checkCorpus(corpusFromBytes(saved.bytes, options), config);
  // the server forgot the room and the run goes on in a new one: the text moves with it
  if (from !== init.room.roomId) await saveRoomCorpus(init.room.roomId, saved);
  return { corpus, source: 'host' };
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
  // before the mesh starts: a volunteer may ask for the text as soon as it is welcomed
  const { corpus, source } = await roomCorpus(init, config);
  post({ type: 'dataset', dataset: datasetOf(corpus, source) });
  post({ type: 'message-limit', bytes: maxMessageBytesFor(config) });

  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.room.roomId));
  serveCorpus(member, corpus.bytes);
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
  recorder = new RoomViewRecorder({
    host,
    roomId: init.room.roomId,
    hostKind: 'dashboard',
    ...(init.history && { startedAt: init.history.startedAt, continueFrom: init.history.last }),
  });
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

  const evaluate = async () => {
    const now = hashes();
    if (now === evaluatedHashes) return;
    evaluatedHashes = now;
    await evaluator.setParams(host.params());
    const loss = await evaluator.evaluate(evalBatches);
    recorder?.setEvalLoss(Number.isFinite(loss) ? loss : null);
  };
  const reportError = (error: unknown) => post({ type: 'error', message: String(error), fatal: false });
  // At every round the replica adopts, apart from evaluation (a long evaluation never delays a
  // save); also at the start (a resumed room's record from an older version is rewritten without
  // the secret it carried) and when the status changes (a paused room is saved as it stands).
  const saver = new RoomCheckpointSaver(
    host,
    async (snapshot) => {
      const files = encodeRoomCheckpoint(snapshot);
      const info = infoOf(snapshot);
      await saveRoomFiles(init.room.roomId, { ...files, info });
      post({ type: 'saved', checkpoint: info });
    },
    reportError,
  );
  saver.request(true);

  let busy: Promise<void> = Promise.resolve();
  const chain = (work: () => Promise<void>) => {
    busy = busy.then(work).catch(reportError);
  };
  chain(evaluate);
  const timers = [
    setInterval(() => chain(evaluate), init.evalEveryMs),
    setInterval(() => {
      if (!recorder) return;
      recorder.sample();
      post({ type: 'view', update: recorder.update(), step: roomStep(host) });
    }, init.viewEveryMs),
  ];

  return {
    handle(message) {
      switch (message.type) {
        case 'status':
          setStatus(message.status);
          saver.request(true);
          return;
        case 'params': {
          const params = host.params();
          // the fragment hashes name this θ_global (the sampler reuses its export while they hold)
          post({ type: 'params', id: message.id, params, config, key: hashes() }, [params.buffer]);
          return;
        }
        case 'files': {
          // the download: θ_global and the run state now, without the room's credentials
          const files = encodeRoomCheckpoint(roomCheckpointOf(host));
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
    async close() {
      for (const timer of timers) clearInterval(timer);
      host.close();
      saver.close();
      await Promise.all([busy, saver.settled()]);
      evaluator.destroy();
    },
  };
}

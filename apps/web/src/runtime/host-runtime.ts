/**
 * The dashboard's host, inside the room worker (docs/design.md, "The host is a replica"): the
 * coordinator and a replica of θ_global on the mesh, validation loss of θ_global on a CPU engine,
 * the room view for the charts and the watch link, and checkpoints in IndexedDB at every round
 * the host's replica adopts (RoomCheckpointSaver: a closed or crashed tab loses at most the rounds
 * in flight). None of it runs on the main thread, so the dashboard stays responsive during rounds.
 * The checkpoint, in IndexedDB and downloaded, carries no credentials: the host secret stays in
 * the room's own record (checkpoint-store.ts), which the main thread keeps.
 */
import { type Batch, type Corpus, corpusFromBytes, type Dataset, urlDatasetSource } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { createWireCodec, maxMessageBytesFor, type RunConfig } from '@shoal/protocol';
import { decodeRoomCheckpoint, type RoomCheckpoint } from '@shoal/room';
import { evalBatchesFor, HostService, viewHistoryOf, wallTimers } from '@shoal/room/services';
import { Member, runIdFor, serveDataset, wallClock } from '@shoal/swarm';
import { loadRoomCorpus, loadRoomFiles, saveRoomCorpus, saveRoomFiles } from './checkpoint-store.ts';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type { CheckpointInfo, DatasetInfo, HostInit, RuntimeControl, RuntimeOut } from './messages.ts';
import { datasetEvalBatches, datasetUrlOf, openUrlDataset, packedDatasetInfo } from './packed-dataset.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface HostRuntime {
  handle(message: RuntimeControl): void;
  /**
   * Stops the timers and the coordinator, writes a last checkpoint (HostService.stop); the room
   * worker itself just ends with its page.
   */
  close(): Promise<void>;
}

/** What the page says of a checkpoint; `step` is the room's (the view's) when it was saved. */
function infoOf(checkpoint: RoomCheckpoint, step: number): CheckpointInfo {
  const { state } = checkpoint;
  return {
    savedAt: state.savedAt,
    step,
    tokens: state.roomTokens,
    fragments: state.fragments,
    totalSteps: state.config.train.totalSteps,
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

/**
 * What the host needs of the room's data: a text to serve (none in a dataset room, whose
 * volunteers fetch their own shards), the validation batches θ_global is evaluated on (a
 * dataset's held-out shards, or the text's last tenth), and the data as the page shows it.
 */
async function roomData(
  init: HostInit,
  config: RunConfig,
): Promise<{ corpus?: Corpus; evalBatches: Batch[]; info: DatasetInfo; packed?: { dataset: Dataset; url: string } }> {
  const ref = config.data.dataset;
  if (ref) {
    if (config.pipeline) throw new Error('a pipeline-parallel room cannot train on a packed dataset yet');
    const url = datasetUrlOf(ref.url, init.origin);
    const dataset = await openUrlDataset(url, { expectHash: ref.manifest });
    const evalBatches = await datasetEvalBatches(dataset, config);
    return { evalBatches, info: packedDatasetInfo(ref, dataset), packed: { dataset, url } };
  }
  const { corpus, source } = await roomCorpus(init, config);
  return { corpus, evalBatches: evalBatchesFor(corpus, config, init.evalBatches), info: datasetOf(corpus, source) };
}

/** A saved run's config with its schedule lengthened to `steps` (train on); as it is when null. */
export function withScheduleSteps(config: RunConfig, steps: number | null): RunConfig {
  return steps === null ? config : { ...config, train: { ...config.train, totalSteps: steps } };
}

export async function startHost(init: HostInit, transport: PortTransport, post: Post): Promise<HostRuntime> {
  let saved: RoomCheckpoint | null = null;
  if (init.resume) {
    const files = await loadRoomFiles(init.resume);
    if (!files) throw new Error(`no checkpoint of room ${init.resume} in this browser`);
    saved = decodeRoomCheckpoint(files.weights, files.state);
    // an older host's run state holds no step: its record's goes in its place
    saved.state.step ??= files.info?.step;
  }
  const config = saved ? withScheduleSteps(saved.state.config, init.scheduleSteps) : init.config;
  if (!config) throw new Error('a new room needs a run config');
  // before the mesh starts: a volunteer may ask for the text as soon as it is welcomed
  const { corpus, evalBatches, info, packed } = await roomData(init, config);
  post({ type: 'dataset', dataset: info });
  post({ type: 'message-limit', bytes: maxMessageBytesFor(config) });

  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.room.roomId));
  const reportError = (error: unknown) => post({ type: 'error', message: String(error), fatal: false });
  // a dataset room: volunteers whose fetches from its URL fail fetch from this page over the mesh
  if (packed) {
    await serveDataset(member, packed.dataset, { source: urlDatasetSource(packed.url) }).catch(reportError);
  }
  const service = await HostService.create({
    member,
    config,
    corpus,
    saved,
    params: init.params,
    deadlineMs: init.deadlineMs,
    roomId: init.room.roomId,
    hostKind: 'dashboard',
    status: init.status,
    // validation loss of θ_global on one CPU engine, θ_global swapped in for each evaluation
    createEvaluator: (run, params) => new CpuTrainer(run.model, run.train, params),
    evalBatches,
    evalEveryMs: init.evalEveryMs,
    publishEveryMs: init.viewEveryMs,
    timers: wallTimers,
    // at every round the replica adopts, apart from evaluation (a long evaluation never delays a
    // save); also at the start (a resumed room's record from an older version is rewritten without
    // the secret it carried) and when the status changes (a paused room is saved as it stands)
    storage: {
      async save(files, checkpoint) {
        const info = infoOf(checkpoint, service.roomStep());
        await saveRoomFiles(init.room.roomId, { ...files, info });
        post({ type: 'saved', checkpoint: info });
      },
    },
    onView: (update, step) => post({ type: 'view', update, step }),
    onError: reportError,
  });
  transport.start();
  if (saved) post({ type: 'resumed', checkpoint: infoOf(saved, saved.state.step ?? 0) });
  service.start(init.history && viewHistoryOf(init.history));

  return {
    handle(message) {
      switch (message.type) {
        case 'status':
          service.setStatus(message.status);
          return;
        case 'params': {
          const params = service.host.params();
          // the fragment hashes name this θ_global (the sampler reuses its export while they hold)
          post({ type: 'params', id: message.id, params, config, key: service.paramsKey() }, [params.buffer]);
          return;
        }
        case 'files': {
          // the download: θ_global and the run state now, without the room's credentials
          const files = service.files();
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
    close: () => service.stop(),
  };
}

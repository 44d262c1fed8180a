/**
 * For tests of a room over real connections, in one process: the signaling server, a host
 * (coordinator + θ_global replica) on its own @roamhq/wrtc mesh, and CPU workers joined as
 * `shoal worker` joins, each with its own signaling socket and mesh. Everything opened is closed
 * by `close()` (an afterAll), workers first.
 */
import { loadMobyDick, splitCorpus, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { startServer } from '@shoal/server';
import { type CoordinatorEvent, Host } from '@shoal/swarm';
import { connectSignaling, joinMesh, loadWrtc, type RoomLink } from './room.ts';
import { joinRoomAsWorker, type RoomWorker } from './worker.ts';

/** Polls `condition` every 50 ms; fails naming `what` after `timeoutMs`. */
export async function until<T>(
  condition: () => T | undefined | null | false,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export type WebrtcRoom = Awaited<ReturnType<typeof openWebrtcRoom>>;

export async function openWebrtcRoom(
  config: RunConfig,
  cleanups: (() => Promise<unknown> | unknown)[],
  /** Shard owners' deadline; the coordinator gives a round twice that. */
  deadlineMs = 10_000,
) {
  const wrtc = await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
  const server = await startServer({ port: 0, logger: null });
  cleanups.push(() => server.close());
  const events: CoordinatorEvent[] = [];
  const signal = await connectSignaling(server.url);
  const room = await signal.create();
  const hostLink: RoomLink = await joinMesh(signal, room, [], wrtc);
  cleanups.push(() => hostLink.close());
  const host = await Host.create({
    member: hostLink.member,
    config,
    deadlineMs,
    onEvent: (event) => events.push(event),
  });
  const corpus = splitCorpus(loadMobyDick());
  const evalBatches = validationBatches(corpus.validation, { batchSize: 4, seqLen: 64, count: 4 });
  const evaluator = new CpuTrainer(config.model, config.train, host.params());
  cleanups.push(() => evaluator.destroy());
  /** Validation loss of θ_global now. */
  const evaluate = async () => {
    await evaluator.setParams(host.params());
    return evaluator.evaluate(evalBatches);
  };
  /** A CPU worker, joined as `shoal worker --backend cpu` joins. */
  const join = async (): Promise<RoomWorker> => {
    const w = await joinRoomAsWorker({
      server: server.url,
      room: room.roomId,
      token: room.joinToken,
      wrtc,
      capabilities: { backend: 'cpu', adapter: 'test', tokensPerSecond: 0 },
      createEngine: async (run, params) => new CpuTrainer(run.model, run.train, params),
    });
    cleanups.push(() => w.leave());
    return w;
  };
  const committed = (p?: number) =>
    events.filter(
      (e): e is Extract<CoordinatorEvent, { event: 'round-committed' }> =>
        e.event === 'round-committed' && (p === undefined || e.fragment === p),
    );
  return { server, host, events, evaluate, join, committed };
}

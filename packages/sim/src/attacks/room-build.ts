/**
 * The in-memory room of one attack run (room.ts runRoom), built as `shoal simulate` builds it: a
 * host and W CPU workers on the simulated network and a virtual clock, the referee (oracle.ts)
 * and the meters of what honest members hold on the attackers' account (meters.ts).
 */
import { BatchSampler } from '@shoal/data';
import { buildFragments, createFragmentHasher } from '@shoal/diloco';
import { buildLayout } from '@shoal/model';
import { createWireCodec, type PeerId, type RunConfig } from '@shoal/protocol';
import { Host, Member, Worker } from '@shoal/swarm';
import { SimKeys, SimNetwork, VirtualClock } from '../index.ts';
import { SharedRounds } from '../shared-rounds.ts';
import { SharedVectors } from '../shared-vectors.ts';
import { Forger } from './forge.ts';
import { FutureRoundMeter, UplinkMeter } from './meters.ts';
import { RoundOracle } from './oracle.ts';
import type { RoomRun, RoomSettings } from './room.ts';
import type { AttackContext, HostilePeer } from './types.ts';

const RUN_ID = 13;

/** What the room is made of before its members join: the clock, the network, the keys, the forger. */
interface RoomBase {
  config: RunConfig;
  clock: VirtualClock;
  network: SimNetwork;
  codec: AttackContext['codec'];
  fragments: AttackContext['fragments'];
  hasher: AttackContext['hasher'];
  /** The workers' ids, w0…w(W-1). */
  peers: PeerId[];
  hostileIds: Set<PeerId>;
  forger: Forger;
  /** A member joining the network as `peer`, with its key pair. */
  memberOf(peer: PeerId): Member;
}

/** The host, the referee beside it, and what they record. */
interface RoomHost {
  host: Host;
  hostMember: Member;
  referee: RoundOracle;
  meter: FutureRoundMeter;
  vectors: SharedVectors;
  memo: SharedRounds;
  commits: RoomRun['commits'];
  aborts: RoomRun['aborts'];
}

export interface RoomWorker {
  peer: PeerId;
  member: Member;
  worker: Worker;
}

export interface Room extends RoomBase, RoomHost {
  workers: RoomWorker[];
  hostile: HostilePeer[];
  honest: RoomWorker[];
  /** The host and the honest workers. */
  honestMembers: Member[];
  uplinks: UplinkMeter;
}

/** Builds the room of `settings` on `config` (roomConfig's), its members created in this order: host, w0, w1, … */
export async function buildRoom(settings: RoomSettings, config: RunConfig): Promise<Room> {
  const base = await roomBase(settings, config);
  const hosting = await hostOf(settings, base);
  const workers = workersOf(settings, base, hosting);
  const hostile: HostilePeer[] = workers.filter((w) => base.hostileIds.has(w.peer));
  const honest = workers.filter((w) => !base.hostileIds.has(w.peer));
  const honestMembers = [hosting.hostMember, ...honest.map((w) => w.member)];

  const uplinks = new UplinkMeter(base.network, hostile, honestMembers);
  return { ...base, ...hosting, workers, hostile, honest, honestMembers, uplinks };
}

async function roomBase(settings: RoomSettings, config: RunConfig): Promise<RoomBase> {
  const model = config.model;
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 20, upMbps: 50, downMbps: 50 });
  const codec = await createWireCodec();
  const fragments = buildFragments(buildLayout(model), config.diloco.fragments, config.diloco.fragmentMode);
  const hasher = await createFragmentHasher(config.diloco.hashAlgorithm);
  const peers = Array.from({ length: settings.workers }, (_, i) => `w${i}`);
  const hostileCount = Math.min(settings.hostile, settings.workers - 1);
  const hostileIds = new Set(
    settings.hostileAt === 'first' ? peers.slice(0, hostileCount) : peers.slice(settings.workers - hostileCount),
  );
  // Every member has a key pair, bound to its id as the signaling server binds them, and the
  // room refuses unsigned contributions, results and hash reports, as every room does: a hostile
  // peer signs its own.
  const keys = await SimKeys.create(1 + settings.workers);
  const memberOf = (peer: PeerId) => new Member(network.join(peer), codec, clock, RUN_ID, keys.memberOptions(peer));
  for (const peer of ['host', ...peers]) keys.memberOptions(peer);
  const forger = new Forger(
    network,
    codec,
    RUN_ID,
    () => clock.now() >= settings.startMs,
    keys.identities,
    (work) => clock.track(work),
  );
  return { config, clock, network, codec, fragments, hasher, peers, hostileIds, forger, memberOf };
}

/** The host, and the referee that watches its rounds (created once the host is: it reads its state). */
async function hostOf(settings: RoomSettings, base: RoomBase): Promise<RoomHost> {
  const { config, clock, network, codec, forger, hostileIds, memberOf } = base;
  const commits: RoomRun['commits'] = [];
  const aborts: RoomRun['aborts'] = [];
  let oracle: RoundOracle | null = null;
  const meter = new FutureRoundMeter(hostileIds, (p) => oracle?.latestRound(p) ?? 0);

  // Its replicas share what they agree on as `shoal simulate`'s do (round-memo.ts): each result
  // under its exact inputs, so what a hostile peer sends one member is never what another computes from.
  const vectors = new SharedVectors();
  const memo = new SharedRounds();
  const hostMember = memberOf('host');
  meter.watch(hostMember);
  // the host may aggregate too (a referee of disputed shards): what it had, before its handlers
  hostMember.on('contribution', (from, message) => oracle?.arrival('host', from, message));
  const host = await Host.create({
    member: hostMember,
    config,
    params: memo.seededInit(config.model, config.train.seed),
    vectors,
    memo,
    deadlineMs: settings.deadlineMs,
    onEvent: (event) => {
      if (event.event === 'round-committed') {
        oracle?.committedRound(event.fragment, event.round, event.hash);
        commits.push({
          fragment: event.fragment,
          round: event.round,
          atMs: clock.now(),
          contributors: event.contributors,
        });
      } else if (event.event === 'round-aborted') {
        aborts.push({ fragment: event.fragment, round: event.round, reason: event.reason, atMs: clock.now() });
      }
    },
  });
  const referee = new RoundOracle(config, codec, forger.forged, host.replica.state, 'host');
  oracle = referee;
  network.onSend('host', referee.sendHook('host'));
  return { host, hostMember, referee, meter, vectors, memo, commits, aborts };
}

/** The W workers, each with its own batches, the referee's hooks on it before its own handlers. */
function workersOf(settings: RoomSettings, base: RoomBase, hosting: RoomHost): RoomWorker[] {
  const { network, hostileIds, memberOf } = base;
  const { referee, meter, vectors, memo } = hosting;
  return base.peers.map((peer, i) => {
    const member = memberOf(peer);
    network.onSend(peer, referee.sendHook(peer));
    // before the Worker's own handler: what the owner had when it aggregated
    member.on('contribution', (from, message) => referee.arrival(peer, from, message));
    if (!hostileIds.has(peer)) meter.watch(member);
    const sampler = new BatchSampler(settings.trainTokens, {
      batchSize: settings.batch,
      seqLen: settings.seqLen,
      seed: settings.seed,
      worker: i,
    });
    const worker = new Worker({
      member,
      coordinator: 'host',
      capabilities: { backend: 'cpu', adapter: 'attacks', tokensPerSecond: 0 },
      createTrainer: (run, params) => settings.createTrainer(run.model, run.train, params),
      nextBatch: () => sampler.next(),
      sleepAfterStepMs: () => settings.computeMsPerStep,
      vectors,
      memo,
      initialParams: (run) => memo.seededInit(run.model, run.train.seed),
    });
    return { peer, member, worker };
  });
}

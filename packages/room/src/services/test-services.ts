/**
 * A room for the services' tests: a HostService and VolunteerServices on the simulated network
 * and the virtual clock, with fake timers, fake storage and a counting evaluator. Each volunteer's
 * clock reads the virtual time plus the compute its engine has "spent" (100 ms a step), so the
 * duty cycle's rest and the rounds move on in virtual time.
 */
import { corpusFromBytes, loadMobyDick } from '@shoal/data';
import { CpuTrainer, type Trainer } from '@shoal/model';
import { createWireCodec, type RoomViewUpdate, type RunConfig } from '@shoal/protocol';
import { SimNetwork, VirtualClock } from '@shoal/sim';
import type { CoordinatorEvent } from '@shoal/swarm';
import { Member, type SwarmClock } from '@shoal/swarm';
import type { RoomCheckpoint } from '../room-checkpoint.ts';
import type { RoomView } from '../room-view.ts';
import { createRunConfig } from '../run-config.ts';
import { type Evaluator, HostService, type HostServiceOptions, type Timers, viewHistoryOf } from './host-service.ts';
import { VolunteerService, type VolunteerServiceOptions } from './volunteer-service.ts';

const RUN = 7;
export const STEP_MS = 100;
export const corpus = corpusFromBytes(loadMobyDick().subarray(0, 200_000), { name: 'moby-dick', seqLen: 64 });

/** setInterval by hand: `fire(ms)` runs every live callback registered with that period. */
export class FakeTimers implements Timers {
  readonly live = new Map<number, { ms: number; callback: () => void }>();
  private next = 0;
  every(ms: number, callback: () => void): () => void {
    const id = this.next++;
    this.live.set(id, { ms, callback });
    return () => this.live.delete(id);
  }
  fire(ms: number): void {
    for (const timer of [...this.live.values()]) if (timer.ms === ms) timer.callback();
  }
}

/** An evaluator that counts its evaluations; `hold()` keeps the next one pending until released. */
export class FakeEvaluator implements Evaluator {
  evaluations = 0;
  destroyed = false;
  private gate: Promise<void> | null = null;
  release: () => void = () => {};
  async setParams(): Promise<void> {}
  async evaluate(): Promise<number> {
    this.evaluations++;
    await this.gate;
    return 5 - this.evaluations / 10;
  }
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.release = () => {
        this.gate = null;
        resolve();
      };
    });
  }
  destroy(): void {
    this.destroyed = true;
  }
}

export async function createServiceRoom(
  options: {
    status?: HostServiceOptions['status'];
    totalSteps?: number;
    /** Changes the run config (a dataset room, a larger batch). */
    configure?: (config: RunConfig) => RunConfig;
    /** A resumed room: a checkpoint another service room saved. */
    saved?: RoomCheckpoint;
  } = {},
) {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 20, upMbps: 50, downMbps: 50 });
  const codec = await createWireCodec();
  const configure = options.configure ?? ((config: RunConfig) => config);
  const config: RunConfig = configure(
    createRunConfig({
      preset: 'nano',
      train: { batchSize: 4, seqLen: 64, maxLr: 3e-3, warmupSteps: 10, totalSteps: options.totalSteps ?? 400, seed: 1 },
      diloco: { innerSteps: 10, fragments: 2 },
      heartbeatMs: 200,
    }),
  );
  const timers = new FakeTimers();
  const evaluator = new FakeEvaluator();
  const saved: RoomCheckpoint[] = [];
  const views: { update: RoomViewUpdate; step: number }[] = [];
  const errors: unknown[] = [];
  const evaluated: (number | null)[] = [];
  const ended: string[] = [];
  const events: CoordinatorEvent[] = [];
  /** A host service on a new 'host' member, from `from` (a checkpoint) or from nothing. */
  const hostService = async (from: RoomCheckpoint | null) => {
    // a test room without key pairs: its members require no signatures (test-room.ts says why)
    const member = new Member(network.join('host'), codec, clock, RUN, { requireSignatures: false });
    const service = await HostService.create({
      member,
      config,
      corpus,
      saved: from,
      deadlineMs: 5_000,
      roomId: 'r00m',
      hostKind: 'cli',
      status: options.status ?? 'running',
      createEvaluator: () => evaluator,
      evalBatches: [],
      evalEveryMs: 30_000,
      publishEveryMs: 2_000,
      timers,
      storage: {
        save: async (_files, checkpoint) => {
          saved.push(checkpoint);
        },
      },
      onEvent: (event) => events.push(event),
      onView: (update, step) => views.push({ update, step }),
      onEvaluated: (loss) => evaluated.push(loss),
      onEnded: (reason) => ended.push(reason),
      onError: (error) => errors.push(error),
    });
    return { member, service };
  };
  const first = await hostService(options.saved ?? null);
  const hostMember = first.member;
  const service = first.service;

  /**
   * The host's page reloaded: the host crashes (its timers go with it) and a new one starts from
   * its last checkpoint and `kept`, the view the server kept; the volunteers stay.
   */
  const restartHost = async (kept: RoomView) => {
    network.crash('host');
    timers.live.clear();
    const next = await hostService(saved.at(-1) ?? null);
    next.service.start(viewHistoryOf(kept));
    return next.service;
  };

  /** A volunteer on the network whose engine spends STEP_MS of its clock per step. */
  /** A volunteer on the CPU engine whose steps take STEP_MS on its clock; `onEngine` sees its engine. */
  const addVolunteer = (
    peer: string,
    overrides: Partial<VolunteerServiceOptions> = {},
    onEngine: (engine: Trainer) => void = () => {},
  ) => {
    let spent = 0;
    const own: SwarmClock = {
      now: () => clock.now() + spent,
      sleep: (ms) => clock.sleep(ms),
      setTimer: (ms, callback) => clock.setTimer(ms, callback),
      track: (work) => clock.track(work),
    };
    const member = new Member(network.join(peer), codec, own, RUN, { requireSignatures: false });
    const engine = (run: RunConfig, params: Float32Array): Trainer => {
      const trainer = new CpuTrainer(run.model, run.train, params);
      const step = trainer.step.bind(trainer);
      trainer.step = async (...args) => {
        spent += STEP_MS;
        return step(...args);
      };
      onEngine(trainer);
      return trainer;
    };
    return new VolunteerService({
      member,
      coordinator: 'host',
      capabilities: { backend: 'cpu', adapter: 'test', tokensPerSecond: 0 },
      loadCorpus: async () => corpus,
      createEngine: async (run, params) => engine(run, params),
      dutyCycle: () => 0.5,
      ...overrides,
    });
  };

  const committed = () => events.filter((e) => e.event === 'round-committed');
  return {
    ...{ clock, network, config, service, hostMember, timers, evaluator },
    ...{ saved, views, errors, evaluated, ended, events, committed, addVolunteer, restartHost },
  };
}

/**
 * One mesh stage beside no network and no engine: the coordinator's rosters and the group's pipe
 * messages are handed to it directly, and what it refuses or sends is recorded. For the stage's
 * intake tests and the pipeline attack probe (attacks/pipeline-attacks.ts), which measure what a
 * stage keeps on its neighbours' account; it never steps (its engine is never built).
 */
import {
  type Message,
  type PeerId,
  type PipelineSlot,
  type PipeMessage,
  RejectionCounters,
  type RosterMessage,
  type RunConfig,
} from '@shoal/protocol';
import type { SwarmClock } from '../member.ts';
import { MeshStageTrainer, type StageMember } from './mesh-stage.ts';

export interface StageHarness {
  stage: MeshStageTrainer;
  /** The stage's refusals, as a member counts them. */
  counters: RejectionCounters;
  /** What the stage sent (its `rejected` answers among them). */
  sent: { to: PeerId; message: Message }[];
  /** The coordinator's roster: each listed peer in its place (others are members without one). */
  roster(places: Record<PeerId, PipelineSlot | null>): void;
  /** A pipe message from `from`, as the member's receiver would dispatch it. */
  pipe(from: PeerId, message: Omit<PipeMessage, 'kind'>): void;
}

const COORDINATOR = 'host';

/** A clock whose timers never fire: nothing here waits. */
const stillClock: SwarmClock = {
  now: () => 0,
  sleep: () => new Promise<void>(() => {}),
  setTimer: () => () => {},
  track: (work) => Promise.resolve(work),
};

export function stageHarness(config: RunConfig, self: PeerId): StageHarness {
  const counters = new RejectionCounters({ now: () => 0 });
  const sent: StageHarness['sent'] = [];
  const handlers = new Map<string, ((from: PeerId, message: never) => void)[]>();
  const refuse = (from: PeerId, kind: Message['kind'], reason: string, detail: string) => {
    counters.record({ from, kind, reason, detail });
  };
  const member: StageMember = {
    self,
    clock: stillClock,
    on(kind: string, handler: (from: PeerId, message: never) => void) {
      handlers.set(kind, [...(handlers.get(kind) ?? []), handler]);
      return () => {};
    },
    onPeerDown() {},
    refuse,
    rejectBack(from: PeerId, kind: Message['kind'], reason: string, detail: string) {
      refuse(from, kind, reason, detail);
      sent.push({ to: from, message: { kind: 'rejected', about: kind, reason, message: detail } });
    },
    async send(to: PeerId, message: Message) {
      sent.push({ to, message });
    },
  };
  const stage = new MeshStageTrainer(
    {
      member,
      config,
      coordinator: COORDINATOR,
      createStage: () => new Promise(() => {}),
    },
    new Float32Array(0),
  );
  const dispatch = (kind: string, from: PeerId, message: object) => {
    for (const handler of handlers.get(kind) ?? []) handler(from, message as never);
  };
  let epoch = 0;
  return {
    stage,
    counters,
    sent,
    roster(places) {
      const members = Object.entries(places).map(([peer, pipeline]) => ({
        peer,
        role: 'worker' as const,
        status: 'synced' as const,
        reason: '',
        capabilities: { backend: 'cpu' as const, adapter: 'harness', tokensPerSecond: 0 },
        ...(pipeline ? { pipeline } : {}),
      }));
      const roster: RosterMessage = { kind: 'roster', epoch: ++epoch, coordinator: COORDINATOR, members };
      dispatch('roster', COORDINATOR, roster);
    },
    pipe(from, message) {
      dispatch('pipe', from, { kind: 'pipe', ...message });
    },
  };
}

import { must } from '@shoal/sim/test-room';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeRoomCheckpoint } from '../room-checkpoint.ts';
import { HOST_DEFAULTS, scheduleStep, viewHistoryOf } from './host-service.ts';
import { createServiceRoom } from './test-services.ts';
import type { VolunteerService } from './volunteer-service.ts';

const EVAL_MS = 30_000;
const PUBLISH_MS = 2_000;
const hashesOf = (fragments: { hash: string }[]) => fragments.map((f) => f.hash).join();

let volunteers: VolunteerService[] = [];
afterEach(() => {
  for (const v of volunteers) v.destroy();
  volunteers = [];
});

describe('the host service', () => {
  it('checkpoints at start and whenever θ_global moves, evaluates only when it moved, and publishes on its timer', async () => {
    const room = await createServiceRoom();
    const { service, timers, evaluator, saved, clock } = room;
    // nothing is recorded, written or timed before start()
    expect(timers.live.size).toBe(0);
    expect(saved).toEqual([]);
    service.start();
    expect([...timers.live.values()].map((t) => t.ms).sort()).toEqual([PUBLISH_MS, EVAL_MS]);
    await clock.runAsync({ until: 10 });
    expect(saved).toHaveLength(1); // the room as it starts
    expect(evaluator.evaluations).toBe(1);
    expect(room.evaluated).toEqual([4.9]);

    // θ_global has not moved: the evaluation timer evaluates nothing
    timers.fire(EVAL_MS);
    await clock.runAsync({ until: 20 });
    expect(evaluator.evaluations).toBe(1);

    volunteers = [room.addVolunteer('v0'), room.addVolunteer('v1')];
    for (const v of volunteers) void v.start();
    await clock.runAsync({ until: 6_000 });
    expect(room.committed().length).toBeGreaterThanOrEqual(2);
    // one save per adopted round at most (coalesced while one is written), the last one as the host holds it
    expect(saved.length).toBeGreaterThan(1);
    expect(saved.length).toBeLessThanOrEqual(1 + room.committed().length);
    expect(hashesOf(saved.at(-1)?.state.fragments ?? [])).toBe(service.paramsKey());
    timers.fire(EVAL_MS);
    await clock.runAsync({ until: 6_010 });
    expect(evaluator.evaluations).toBe(2);

    timers.fire(PUBLISH_MS);
    const view = room.views.at(-1);
    // the room's step: the median worker's on the schedule (2 workers: half their tokens' steps)
    expect(view?.step).toBe(service.host.coordinator.medianStep);
    expect(view?.step).toBeLessThan(scheduleStep(room.config, service.host.coordinator.roomTokens));
    expect(view?.update).toMatchObject({ roomId: 'r00m', hostKind: 'cli', status: 'running' });
    expect(view?.update.metrics.evalLoss).toBe(4.8);
    expect(view?.update.peers.map((p) => p.peer).sort()).toEqual(['v0', 'v1']);
    expect(service.metrics()).toMatchObject({ members: 2, evalLoss: 4.8, tokens: service.host.coordinator.roomTokens });
    // the download is the same pair of files
    const files = service.files();
    expect(hashesOf(decodeRoomCheckpoint(files.weights, files.state).state.fragments)).toBe(service.paramsKey());
    expect(room.errors).toEqual([]);
  }, 60_000);

  it('pauses the room and saves it as it stands on a status change', async () => {
    const room = await createServiceRoom({ status: 'waiting' });
    const { service, clock, saved } = room;
    expect(service.host.coordinator.paused).toBe(true);
    service.start();
    await clock.runAsync({ until: 10 });
    service.setStatus('running');
    expect(service.host.coordinator.paused).toBe(false);
    service.setStatus('paused');
    await clock.runAsync({ until: 20 });
    expect(service.host.coordinator.paused).toBe(true);
    expect(saved.length).toBe(3);
    room.timers.fire(PUBLISH_MS);
    expect(room.views.at(-1)?.update.status).toBe('paused');
  });

  it('stops: timers off, a last checkpoint that does not wait for an evaluation in progress, a last view', async () => {
    const room = await createServiceRoom();
    const { service, clock, saved, evaluator, timers } = room;
    evaluator.hold();
    service.start();
    await clock.runAsync({ until: 10 });
    expect(evaluator.evaluations).toBe(1); // in progress, held
    const before = saved.length;
    const stopped = service.stop();
    await clock.runAsync({ until: 20 });
    expect(timers.live.size).toBe(0);
    expect(saved.length).toBe(before + 1); // written while the evaluation still runs
    expect(evaluator.destroyed).toBe(false);
    evaluator.release();
    await stopped;
    expect(evaluator.destroyed).toBe(true);
    expect(room.views.at(-1)?.update.status).toBe('stopped');
    expect(service.stop()).toBe(stopped);
  });

  it('names one set of defaults per kind of host', () => {
    expect(HOST_DEFAULTS.cli).toMatchObject({ evalEveryMs: 30_000, evalBatches: 4, publishEveryMs: 2_000 });
    expect(HOST_DEFAULTS.dashboard).toMatchObject({ evalEveryMs: 5_000, evalBatches: 4, publishEveryMs: 1_000 });
  });

  it('publishes θ_global’s first evaluation at once: the chart’s first point, before any round', async () => {
    const room = await createServiceRoom({ status: 'waiting' });
    room.service.start();
    await room.clock.runAsync({ until: 10 });
    // no timer fired: the evaluation itself published
    expect(room.views).toHaveLength(1);
    const first = room.views[0]?.update;
    expect(first?.points.map((p) => p.evalLoss)).toEqual([4.9]);
    expect(first?.metrics.roundsCommitted).toBe(0);
    expect(first?.metrics.nextRounds?.map((n) => [n.fragment, n.round, n.steps, n.etaMs])).toEqual([
      [0, 1, 10, null], // H = 10; no volunteer, so no speed
      [1, 1, 15, null], // staggered by H/P
    ]);
    expect(first?.metrics.evalTrend).toMatchObject({ best: 4.9, rising: false });
  });

  it('stops by itself when the room’s step reaches the schedule’s total steps, ended by the schedule', async () => {
    const room = await createServiceRoom({ totalSteps: 40 });
    const { service, clock, saved } = room;
    service.start();
    volunteers = [room.addVolunteer('v0'), room.addVolunteer('v1')];
    for (const v of volunteers) void v.start();
    let ended = 0;
    for (let t = 500; t <= 8_000 && room.ended.length === 0; t += 500) {
      await clock.runAsync({ until: t });
      room.timers.fire(PUBLISH_MS);
      ended = t;
    }
    expect(room.ended).toEqual(['schedule']);
    const last = room.views.at(-1);
    expect(last?.update).toMatchObject({ status: 'stopped', endedBy: 'schedule' });
    expect(last?.step).toBeGreaterThanOrEqual(40);
    expect(service.host.coordinator.paused).toBe(true);
    await clock.runAsync({ until: ended + 100 });
    // the last checkpoint: the room as it ended, at the schedule's end
    expect(saved.at(-1)?.state.roomTokens).toBeGreaterThanOrEqual(40 * 4 * 64);
    // stop() afterwards keeps the reason
    await service.stop();
    expect(room.views.at(-1)?.update.endedBy).toBe('schedule');
    expect(room.ended).toEqual(['schedule']);
  }, 60_000);

  it('goes on from a kept view: the room’s tokens, step and rounds do not go back', async () => {
    const first = await createServiceRoom();
    first.service.start();
    volunteers = [first.addVolunteer('v0'), first.addVolunteer('v1')];
    for (const v of volunteers) void v.start();
    await first.clock.runAsync({ until: 4_000 });
    first.timers.fire(PUBLISH_MS);
    const kept = first.service.recorder.snapshot();
    expect(kept.metrics.roundsCommitted).toBeGreaterThanOrEqual(2);
    for (const v of volunteers) v.destroy();
    volunteers = [];

    // a host taken back from an older checkpoint (here: none) with the server's kept view
    const second = await createServiceRoom();
    second.service.start(viewHistoryOf(kept));
    await second.clock.runAsync({ until: 10 });
    const view = second.service.recorder.snapshot();
    expect(view.metrics.tokens).toBeGreaterThanOrEqual(kept.metrics.tokens);
    expect(view.metrics.step).toBeGreaterThanOrEqual(kept.metrics.step);
    expect(view.metrics.roundsCommitted).toBeGreaterThanOrEqual(kept.metrics.roundsCommitted);
    expect(view.rounds.map((r) => `${r.fragment}.${r.round}`)).toEqual(
      kept.rounds.map((r) => `${r.fragment}.${r.round}`),
    );
    expect(view.metrics.evalTrend?.best).toBe(kept.metrics.evalTrend?.best);
  }, 60_000);

  it('shows the speed measured now: 0 and no round countdown once a paused room’s volunteers stop', async () => {
    const room = await createServiceRoom();
    const { service, clock, timers } = room;
    service.start();
    volunteers = [room.addVolunteer('v0'), room.addVolunteer('v1')];
    for (const v of volunteers) void v.start();
    await clock.runAsync({ until: 6_000 });
    timers.fire(PUBLISH_MS);
    const running = must(room.views.at(-1)).update.metrics;
    expect(running.tokensPerSecond).toBeGreaterThan(0);
    expect(running.stepMs).toBeGreaterThan(0);
    // the volunteers' pages pause their workers when the room's status says paused
    service.setStatus('paused');
    for (const v of volunteers) v.worker.pause();
    await clock.runAsync({ until: 20_000 });
    timers.fire(PUBLISH_MS);
    const paused = must(room.views.at(-1)).update;
    expect(paused.status).toBe('paused');
    expect(paused.metrics.tokensPerSecond).toBe(0);
    expect(paused.peers.every((peer) => peer.tokensPerSecond === 0)).toBe(true);
    expect(paused.metrics.stepMs).toBeNull();
    expect(paused.metrics.nextRounds?.every((next) => next.etaMs === null)).toBe(true);
    expect(service.metrics().tokensPerSecond).toBe(0);
  }, 60_000);

  it('keeps one step across host restarts: it never stalls or goes back, and the schedule ends on it', async () => {
    const TOTAL = 80;
    /** A run of two volunteers to the schedule's end, the host restarted at each of `restarts` (ms). */
    const run = async (restarts: number[]) => {
      const room = await createServiceRoom({ totalSteps: TOTAL });
      room.service.start();
      const own = [room.addVolunteer('v0'), room.addVolunteer('v1')];
      volunteers.push(...own);
      for (const v of own) void v.start();
      let service = room.service;
      const steps: number[] = [];
      const counts: { rounds: number; tokens: number; bytes: number; hostBytes: number }[] = [];
      for (let t = 500; t <= 60_000 && room.ended.length === 0; t += 500) {
        await room.clock.runAsync({ until: t });
        // the server keeps the last view the host published, and the page reloads after it
        if (restarts.includes(t)) service = await room.restartHost(service.recorder.snapshot());
        room.timers.fire(PUBLISH_MS);
        const { step, update } = must(room.views.at(-1));
        steps.push(step);
        const { metrics, points } = update;
        const bytes = must(points.at(-1)).bytes;
        counts.push({ rounds: metrics.roundsCommitted, tokens: metrics.tokens, bytes, hostBytes: metrics.bytesSent });
      }
      // the cumulative figures never go back either
      for (let i = 1; i < counts.length; i++) {
        for (const key of ['rounds', 'tokens', 'bytes', 'hostBytes'] as const)
          expect(must(counts[i])[key], `${key} at publish ${i}`).toBeGreaterThanOrEqual(must(counts[i - 1])[key]);
      }
      expect(room.ended).toEqual(['schedule']);
      expect(room.errors).toEqual([]);
      await room.clock.runAsync({ until: room.clock.now() + 100 });
      return { steps, tokens: must(room.saved.at(-1)).state.roomTokens, config: room.config };
    };
    const plain = await run([]);
    const restarted = await run([2_500, 5_000, 6_000, 9_500]);
    for (const { steps } of [plain, restarted]) {
      for (let i = 1; i < steps.length; i++) {
        expect(steps[i], `step ${i}`).toBeGreaterThanOrEqual(steps[i - 1] as number);
        // two volunteers train a step every 200 ms or so: 3 s without one is a stall
        if (i >= 6) expect(steps[i], `step ${i}`).toBeGreaterThan(steps[i - 6] as number);
      }
      expect(steps.at(-1)).toBeGreaterThanOrEqual(TOTAL);
      expect(steps.at(-1)).toBeLessThan(TOTAL + 10);
    }
    // the same tokens as the run without restarts, within one round (H steps of both volunteers)
    const { train, diloco } = plain.config;
    const round = diloco.innerSteps * 2 * train.batchSize * train.seqLen;
    expect(Math.abs(restarted.tokens - plain.tokens)).toBeLessThanOrEqual(round);
    console.log(`tokens at the schedule's end: ${plain.tokens} plain, ${restarted.tokens} with 4 restarts`);
  }, 120_000);
});

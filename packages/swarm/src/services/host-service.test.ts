import { afterEach, describe, expect, it } from 'vitest';
import { decodeRoomCheckpoint } from '../room-checkpoint.ts';
import { HOST_DEFAULTS, scheduleStep } from './host-service.ts';
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
    expect(view?.step).toBe(scheduleStep(room.config, service.host.coordinator.roomTokens));
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
});

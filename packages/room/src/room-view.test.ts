import { splitStages, stagePlan } from '@shoal/model';
import { MAX_VIEW_HISTORY, MAX_VIEW_ROUNDS, roomViewUpdateSchema } from '@shoal/protocol';
import { createRoom, must } from '@shoal/sim/test-room';
import type { CoordinatorEvent } from '@shoal/swarm';
import { describe, expect, it } from 'vitest';
import { keptOf } from './kept-view.ts';
import { placeOf, ringAllReduceBytes, scheduleStep, wireLabel } from './room-figures.ts';
import { RoomViewRecorder } from './room-view.ts';

/** A room whose host events also reach a recorder on the room's virtual clock (t = virtual ms). */
async function recordedRoom(workers: number, options: Omit<Parameters<typeof createRoom>[0], 'workers'> = {}) {
  let recorder: RoomViewRecorder | null = null;
  const room = await createRoom({ ...options, workers, onEvent: (event) => recorder?.onEvent(event) });
  recorder = new RoomViewRecorder({
    host: room.host,
    roomId: 'room-1',
    hostKind: 'cli',
    startedAt: 0,
    now: () => room.clock.now(),
  });
  return { room, recorder };
}

describe('the room view recorder', () => {
  it('records the round timeline, the peers and chart points of a training room, valid for the wire', async () => {
    const { room, recorder } = await recordedRoom(3);
    const { clock, host, events } = room;
    const shards: [number, number, number, number][] = [];
    host.replica.onResultShard((p, r, received, total) => shards.push([p, r, received, total]));
    recorder.setStatus('running');
    room.startAll();
    const updates = [];
    for (let t = 500; t <= 4_000; t += 500) {
      await clock.runAsync({ until: t });
      if (t === 2_500) recorder.setEvalLoss(2.5);
      recorder.sample();
      if (t % 2_000 === 0) updates.push(recorder.update());
    }
    await room.finish(4_000);

    // Each update carries the points since the previous one; the snapshot all of them.
    const [first, second] = updates.map((u) => roomViewUpdateSchema.parse(u));
    expect(first?.points.map((p) => p.t)).toEqual([500, 1_000, 1_500, 2_000]);
    expect(second?.points.map((p) => p.t)).toEqual([2_500, 3_000, 3_500, 4_000]);
    const snapshot = roomViewUpdateSchema.parse(recorder.snapshot());
    const points = snapshot.points;
    expect(points).toHaveLength(8);
    expect(snapshot).toMatchObject({ roomId: 'room-1', hostKind: 'cli', status: 'running', startedAt: 0 });
    expect(points.map((p) => p.evalLoss)).toEqual([null, null, null, null, 2.5, 2.5, 2.5, 2.5]);
    recorder.setEvalLoss(Number.NaN);
    expect(recorder.snapshot().metrics.evalLoss).toBeNull();

    // Tokens rise; the room trains with three workers from the first sample on.
    const last = must(points.at(-1));
    for (let i = 1; i < points.length; i++) {
      expect(must(points[i]).tokens).toBeGreaterThan(must(points[i - 1]).tokens);
    }
    expect(Object.keys(last.peers).sort()).toEqual(['w0', 'w1', 'w2']);
    expect(last.trainLoss).toBeGreaterThan(0);
    expect(last.tokensPerSecond).toBeGreaterThan(0);
    // the room's step: the median worker's place on the schedule (3 workers at 100 ms a step:
    // about 38 by 4 s), not the room's tokens ÷ tokens per step, which counts every worker's steps
    expect(last.step).toBeLessThanOrEqual(host.coordinator.medianStep);
    expect(last.step).toBeGreaterThan(30);
    expect(snapshot.metrics.step).toBe(host.coordinator.medianStep);
    expect(scheduleStep(host.config, host.coordinator.roomTokens)).toBeGreaterThan(snapshot.metrics.step * 2);
    // the median worker's step time (100 ms), and each fragment's next round at it
    expect(snapshot.metrics.stepMs).toBeGreaterThan(80);
    expect(snapshot.metrics.stepMs).toBeLessThan(150);
    const next = must(snapshot.metrics.nextRounds);
    expect(next.map((n) => n.fragment)).toEqual([0, 1]);
    for (const n of next) {
      expect(n.round).toBe(must(host.fragmentStates()[n.fragment]).round + 1);
      expect(n.steps).toBeLessThanOrEqual(10); // H = 10
      expect(n.etaMs).toBeCloseTo(n.steps * must(snapshot.metrics.stepMs));
    }
    // three workers at one speed: each about a third of the room's tokens since it joined
    const shares = snapshot.peers.map((p) => must(p.share));
    for (const share of shares) expect(share).toBeCloseTo(1 / 3, 1);
    expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 1);
    // one evaluation so far: the best, not rising
    expect(snapshot.metrics.evalTrend).toMatchObject({ best: 2.5, latest: 2.5, rising: false });
    // fp32 DiLoCo: a ring all-reduce of each committed round's fragment among its 3 participants.
    const committed = room.committed() as Extract<CoordinatorEvent, { event: 'round-committed' }>[];
    expect(committed.length).toBeGreaterThanOrEqual(4);
    const committedBy = (t: number) => snapshot.rounds.filter((r) => r.outcome === 'committed' && must(r.endedAt) <= t);
    const fp32 = committedBy(last.t).reduce(
      (sum, r) => sum + ringAllReduceBytes(must(host.fragments[r.fragment]).size, r.participants),
      0,
    );
    expect(last.fp32Bytes).toBe(fp32);
    // Data-parallel: one ring all-reduce of all N parameters per synchronous step of 3 workers.
    const N = host.fragments.reduce((sum, f) => sum + f.size, 0);
    const syncSteps = last.tokens / (4 * 64) / 3;
    expect(last.dpBytes).toBeCloseTo(syncSteps * ringAllReduceBytes(N, 3), -3);
    expect(last.dpBytes).toBeGreaterThan(10 * last.fp32Bytes);
    expect(last.bytes).toBeGreaterThan(host.member.bytesSent);

    // The timeline: every committed round, in order open ≤ reduced ≤ gathered ≤ ended, with its hash.
    for (const event of committed) {
      const entry = must(snapshot.rounds.find((r) => r.fragment === event.fragment && r.round === event.round));
      expect(entry).toMatchObject({
        outcome: 'committed',
        participants: 3,
        detail: event.hash.slice(0, 16),
        codec: 'fp4',
        rank: null,
      });
      const { openedAt, reducedAt, gatheredAt, endedAt } = entry;
      expect(openedAt).toBeLessThan(must(reducedAt));
      expect(must(reducedAt)).toBeLessThanOrEqual(must(gatheredAt));
      expect(must(gatheredAt)).toBeLessThanOrEqual(must(endedAt));
      // the replica hook: one call per result shard, 1 … 3 of 3
      const calls = shards.filter(([p, r]) => p === event.fragment && r === event.round);
      expect(calls.map(([, , received, total]) => [received, total])).toEqual([
        [1, 3],
        [2, 3],
        [3, 3],
      ]);
    }
    expect(snapshot.metrics).toMatchObject({ roundsCommitted: committed.length, roundsAborted: 0 });
    expect(snapshot.metrics.fragments.map((f) => f.round)).toEqual(host.fragmentStates().map((f) => f.round));
    // a dense room: the run's codec, every fragment's latest round dense (rank 0)
    expect(snapshot.metrics.wire).toEqual({ codec: 'fp4', ranks: [0, 0], label: 'fp4 (dense)' });

    // The peers: every worker, its counters, and the committed rounds it contributed to.
    expect(snapshot.peers.map((p) => p.peer).sort()).toEqual(['w0', 'w1', 'w2']);
    for (const peer of snapshot.peers) {
      const contributed = committed.filter((e) => e.contributors.includes(peer.peer)).length;
      expect(peer).toMatchObject({ role: 'worker', status: 'synced', backend: 'cpu', adapter: 'test', rejected: {} });
      expect(peer.roundsContributed).toBe(contributed);
      expect(peer.roundsContributed).toBeGreaterThanOrEqual(4);
      expect(peer.innerStep).toBeGreaterThan(20);
      expect(peer.loss).toBeGreaterThan(0);
      expect(peer.bytesSent).toBeGreaterThan(0);
      expect(peer.lastSeenMs).toBeLessThan(1_500); // the workers stopped at 4 s; the view is at 5 s
    }
    expect(events.some((e) => e.event === 'round-aborted')).toBe(false);
    // not a pipeline room: no places, no pipeline section
    expect(recorder.snapshot()).not.toHaveProperty('pipeline');
    for (const peer of recorder.snapshot().peers) expect(peer).not.toHaveProperty('pipeline');
    recorder.close();
  });

  it('gives a worker alone a share of 1, and a late joiner its part of the tokens since it joined', async () => {
    const { room, recorder } = await recordedRoom(1);
    room.startAll();
    await room.clock.runAsync({ until: 2_000 });
    recorder.sample();
    expect(recorder.snapshot().peers.map((p) => p.share)).toEqual([1]);
    // a second worker at the same speed: half of what the room trained since it came, not its
    // tokens ÷ the room's whole run
    room.start(room.addWorker());
    await room.finish(5_000);
    const late = must(recorder.snapshot().peers.find((p) => p.peer === 'w1'));
    expect(late.share).toBeGreaterThan(0.4);
    expect(late.share).toBeLessThan(0.6);
  });

  it('records the trend from its evaluations, at the room’s step, the best kept over a resume', async () => {
    const { room, recorder } = await recordedRoom(1);
    room.startAll();
    await room.clock.runAsync({ until: 500 });
    recorder.setEvalLoss(3);
    await room.clock.runAsync({ until: 1_000 });
    const bestStep = recorder.step();
    recorder.setEvalLoss(2);
    for (const loss of [2.1, 2.2, 2.3]) recorder.setEvalLoss(loss);
    await room.finish(1_000);
    const trend = recorder.snapshot().metrics.evalTrend;
    expect(trend).toEqual({ best: 2, bestStep, latest: 2.3, rising: true });
    expect(bestStep).toBeGreaterThan(0);
    expect(keptOf(recorder.snapshot()).bestEval).toEqual({ loss: 2, step: bestStep });
  });

  it('goes on from a kept view: its rounds (an open one aborted), each peer’s rounds and the best loss', async () => {
    const room = await createRoom({ workers: 2 });
    const kept = keptOf({
      rounds: [
        { ...roundOf(1), outcome: 'committed', endedAt: 900, detail: 'abc' },
        { ...roundOf(2), outcome: 'open' },
      ],
      peers: [{ peer: 'w0', roundsContributed: 7, bytesSent: 0 } as never],
      metrics: {
        evalTrend: { best: 2.5, bestStep: 90, latest: 2.6, rising: false },
        bytesSent: 5_000,
        bytesReceived: 7_000,
      } as never,
    });
    const recorder = new RoomViewRecorder({ host: room.host, roomId: 'r', hostKind: 'dashboard', kept });
    const view = roomViewUpdateSchema.parse(recorder.snapshot());
    expect(view.rounds.map((r) => [r.round, r.outcome])).toEqual([
      [1, 'committed'],
      [2, 'aborted'],
    ]);
    expect(view.rounds[1]?.detail).toBe('the host went away');
    room.startAll();
    await room.finish(3_000);
    const after = recorder.snapshot();
    const w0 = must(after.peers.find((p) => p.peer === 'w0'));
    const w1 = must(after.peers.find((p) => p.peer === 'w1'));
    expect(w0.roundsContributed).toBe(7 + w1.roundsContributed);
    expect(after.rounds.slice(0, 2).map((r) => r.round)).toEqual([1, 2]);
    // no evaluation since: the kept best stands, no latest yet
    expect(after.metrics.evalTrend).toBeNull();
    recorder.setEvalLoss(2.7);
    expect(recorder.snapshot().metrics.evalTrend).toMatchObject({ best: 2.5, bestStep: 90, latest: 2.7 });
    // the host's own counters go on from the previous page's
    expect(after.metrics.bytesSent).toBe(5_000 + room.hostMember.bytesSent);
    expect(after.metrics.bytesReceived).toBe(7_000 + room.hostMember.bytesReceived);
  });

  it('never counts the room’s bytes back: not when a member leaves, not when a counter restarts', async () => {
    const room = await createRoom({ workers: 2 });
    const recorder = new RoomViewRecorder({ host: room.host, roomId: 'r', hostKind: 'dashboard' });
    room.startAll();
    await room.clock.runAsync({ until: 2_000 });
    recorder.sample();
    const before = must(recorder.snapshot().points.at(-1)).bytes;
    const w1 = must(room.workers[1]);
    const w1Bytes = must(room.host.coordinator.members.get(w1.peer)).bytesSent;
    expect(w1Bytes).toBeGreaterThan(0);
    w1.worker.stop();
    room.network.crash(w1.peer); // it is gone: its part stays in the room's bytes
    await room.clock.runAsync({ until: 4_000 });
    expect(room.host.coordinator.members.has(w1.peer)).toBe(false);
    recorder.sample();
    const after = must(recorder.snapshot().points.at(-1)).bytes;
    expect(after).toBeGreaterThan(before);
    // a counter that goes back (a member's page reloaded under the same id) restarted: all of it is new
    const w0 = must(room.host.coordinator.members.get(must(room.workers[0]).peer));
    expect(w0.bytesSent).toBeGreaterThan(100);
    w0.bytesSent = 100;
    recorder.sample(); // at the same moment: only that counter moved
    expect(must(recorder.snapshot().points.at(-1)).bytes).toBe(after + 100);
    // a member that says hello again holds no counter until its heartbeat: nothing is counted twice
    const w0Bytes = w0.bytesSent;
    w0.bytesSent = 0;
    w0.progress = [];
    recorder.sample();
    w0.bytesSent = w0Bytes;
    w0.progress = [{ step: 0, at: 0 }];
    recorder.sample();
    expect(must(recorder.snapshot().points.at(-1)).bytes).toBe(after + 100);
    await room.finish(4_500);
  });

  it('goes on from a resumed run’s last point: the same time axis, the comparisons from their counts', async () => {
    const room = await createRoom({ workers: 2 });
    const last = { t: 60_000, fp32Bytes: 1e12, dpBytes: 1e13 }; // far beyond what 3 s of nano sends
    const recorder = new RoomViewRecorder({
      host: room.host,
      roomId: 'room-1',
      hostKind: 'dashboard',
      startedAt: -60_000, // the run started a minute before this clock's zero
      now: () => room.clock.now(),
      continueFrom: {
        ...last,
        tokens: 0,
        step: 0,
        trainLoss: null,
        evalLoss: 3,
        tokensPerSecond: 0,
        bytes: 0,
        peers: {},
      },
    });
    room.startAll();
    await room.finish(3_000);
    recorder.sample();
    const point = must(recorder.snapshot().points.at(-1));
    expect(point.t).toBeGreaterThanOrEqual(63_000);
    expect(point.fp32Bytes).toBeGreaterThanOrEqual(last.fp32Bytes);
    expect(point.dpBytes).toBeGreaterThan(last.dpBytes);
  });

  it('keeps the last MAX_VIEW_ROUNDS rounds and a thinned history', async () => {
    const { room, recorder } = await recordedRoom(0);
    for (let round = 1; round <= MAX_VIEW_ROUNDS + 10; round++) {
      recorder.onEvent({
        event: 'round-opened',
        fragment: 0,
        round,
        participants: 2,
        codec: 'fp4',
        rank: null,
        payloadValues: 100,
      });
      if (round % 2) {
        recorder.onEvent({ event: 'round-aborted', fragment: 0, round, reason: 'deadline' });
      } else {
        const hash = 'ab'.repeat(16);
        recorder.onEvent({ event: 'round-committed', fragment: 0, round, participants: 2, hash, contributors: ['a'] });
      }
    }
    const total = MAX_VIEW_HISTORY + 500;
    for (let i = 0; i < total; i++) {
      room.clock.run({ until: i }); // a point per virtual ms
      recorder.sample();
    }
    const snapshot = roomViewUpdateSchema.parse(recorder.snapshot());
    expect(snapshot.rounds).toHaveLength(MAX_VIEW_ROUNDS);
    expect(snapshot.rounds[0]?.round).toBe(11);
    expect(snapshot.rounds.at(-1)).toMatchObject({ round: MAX_VIEW_ROUNDS + 10, outcome: 'committed' });
    expect(snapshot.rounds.at(-2)).toMatchObject({ outcome: 'aborted', detail: 'deadline' });
    // the history spans the whole run at a coarser grain; the update is bounded too
    expect(snapshot.points.length).toBeLessThanOrEqual(MAX_VIEW_HISTORY);
    expect(snapshot.points[0]?.t).toBe(0);
    expect(snapshot.points.at(-1)?.t).toBe(total - 1);
    expect(roomViewUpdateSchema.parse(recorder.update()).points.length).toBeLessThanOrEqual(MAX_VIEW_HISTORY);
    expect(recorder.update().points).toEqual([]);
    // no workers: nothing trained, nothing a data-parallel run would have sent
    expect(snapshot.points.at(-1)).toMatchObject({ tokens: 0, trainLoss: null, dpBytes: 0, peers: {} });
  });

  it("names the codec and each fragment's rank in its latest round, and older views still decode", async () => {
    const { room, recorder } = await recordedRoom(0);
    // before any round: the run's codec, no rank yet
    expect(recorder.snapshot().metrics.wire).toMatchObject({ codec: 'fp4', ranks: [null, null] });
    const open = (fragment: number, round: number, rank: number | null) =>
      recorder.onEvent({
        event: 'round-opened',
        fragment,
        round,
        participants: 2,
        codec: 'int8',
        rank,
        payloadValues: 100,
      });
    open(0, 1, 8);
    open(1, 1, 4);
    open(0, 2, 2); // fragment 0's rank stepped down
    open(1, 2, null); // fragment 1's went dense
    const snapshot = roomViewUpdateSchema.parse(recorder.snapshot());
    expect(snapshot.rounds.map((r) => [r.fragment, r.codec, r.rank])).toEqual([
      [0, 'int8', 8],
      [1, 'int8', 4],
      [0, 'int8', 2],
      [1, 'int8', null],
    ]);
    const { diloco } = room.host.config;
    expect(snapshot.metrics.wire).toEqual({ codec: 'int8', ranks: [2, 0], label: wireLabel('int8', [2, 0], diloco) });

    // a view from before low-rank rounds (no wire, no round codec or rank) decodes as it is
    const { wire: _, ...metrics } = snapshot.metrics;
    const rounds = snapshot.rounds.map(({ codec: _codec, rank: _rank, ...round }) => round);
    const older = roomViewUpdateSchema.parse({ ...snapshot, metrics, rounds });
    expect(older.metrics.wire).toBeUndefined();
    expect(older.rounds[0]).not.toHaveProperty('rank');
  });
});

describe('the room view of a pipeline-parallel room', () => {
  const pipeline = { stages: 2, micros: 2, schedule: '1f1b', activations: 'bf16' } as const;

  it('shows each worker’s place and blocks, the run’s settings, the split and a group waiting for a stage', async () => {
    // 3 workers, S = 2: group 0 is w0 + w1 and trains; group 1 has w2 at stage 0 and waits for stage 1
    const { room, recorder } = await recordedRoom(3, { pipeline, spec: () => ({ computeMsPerStep: 20 }) });
    recorder.setStatus('running');
    room.startAll();
    await room.finish(1_500);
    const view = recorder.snapshot();
    const { config, coordinator } = room.host;

    const split = splitStages(config.model.nLayer, 2); // nano: one block a stage
    const memory = stagePlan(config.model, 4, 64, 2, 2, '1f1b').stageBytes;
    expect(view.pipeline).toEqual({
      stages: 2,
      micros: 2,
      schedule: '1f1b',
      activations: 'bf16',
      split: [
        { stage: 0, firstBlock: 0, endBlock: 1, embeds: true, head: false, memoryBytes: memory[0] },
        { stage: 1, firstBlock: 1, endBlock: 2, embeds: false, head: true, memoryBytes: memory[1] },
      ],
      groups: [
        { id: 0, version: expect.any(Number), members: ['w0', 'w1'], complete: true, waitingFor: [] },
        { id: 1, version: expect.any(Number), members: ['w2', null], complete: false, waitingFor: [1] },
      ],
      unplaced: [],
    });
    expect(must(view.pipeline?.split[0]).memoryBytes).toBeGreaterThan(0);
    // the coordinator's groups, as they are
    const groups = must(coordinator.groups).list();
    expect(view.pipeline?.groups.map((g) => [g.id, g.version, g.members])).toEqual(
      groups.map((g) => [g.id, g.version, g.slots]),
    );
    // each row carries its place: slot and the blocks its stage holds
    const places = Object.fromEntries(view.peers.map((p) => [p.peer, p.pipeline]));
    for (const peer of ['w0', 'w1', 'w2']) {
      const slot = must(coordinator.groups?.slot(peer));
      expect(places[peer]).toEqual(placeOf(slot, split));
    }
    expect(places.w1).toMatchObject({ group: 0, stage: 1, firstBlock: 1, endBlock: 2 });
    expect(places.w2).toMatchObject({ group: 1, stage: 0, firstBlock: 0, endBlock: 1 });
    // the complete group trained; the waiting one did not
    const steps = Object.fromEntries(view.peers.map((p) => [p.peer, p.innerStep]));
    expect(steps.w0).toBeGreaterThan(5);
    expect(steps.w2).toBe(0);
    // the protocol's schema takes the view whole: the watch link shows the same groups
    const wire = roomViewUpdateSchema.parse(view);
    expect(wire.pipeline).toEqual(view.pipeline);
    expect(wire.peers).toEqual(view.peers);
    recorder.close();
  }, 60_000);
});

function roundOf(round: number) {
  return {
    fragment: 0,
    round,
    participants: 2,
    openedAt: round * 100,
    reducedAt: null,
    gatheredAt: null,
    endedAt: null,
    outcome: 'open' as const,
    detail: '',
  };
}

import { buildLayout, CheckpointError, encodeState } from '@shoal/model';
import { MAX_MEMBERS } from '@shoal/protocol';
import { createRoom, evaluate, must, replicaStates } from '@shoal/sim/test-room';
import type { CoordinatorEvent } from '@shoal/swarm';
import { Host } from '@shoal/swarm';
import { describe, expect, it } from 'vitest';
import {
  decodeRoomCheckpoint,
  encodeRoomCheckpoint,
  type RoomCheckpoint,
  RoomCheckpointSaver,
  roomCheckpointOf,
} from './room-checkpoint.ts';

const ROOM = { roomId: 'r00m', hostSecret: 's3cret-0123456789', joinToken: 't0ken-0123456789' };
const contains = (bytes: Uint8Array, text: string) => Buffer.from(bytes).includes(Buffer.from(text, 'utf8'));

describe('a room checkpoint', () => {
  it('round-trips, and a host resumed from it continues the same run with new workers', async () => {
    const first = await createRoom({ workers: 2 });
    first.startAll();
    await first.finish(3_000);
    const saved = roomCheckpointOf(first.host);
    expect(saved.state.fragments.every((f) => f.round >= 2)).toBe(true);
    expect(saved.state.roomTokens).toBeGreaterThan(0);
    const files = encodeRoomCheckpoint(saved);
    const loaded = decodeRoomCheckpoint(files.weights, files.state);
    expect(loaded.params).toEqual(saved.params);
    expect(loaded.momentum).toEqual(saved.momentum);
    expect(loaded.state).toEqual(saved.state);
    expect(loaded.state.room).toBeNull();
    const savedLoss = await evaluate(first.config, saved.params);

    // A new host process: same θ_global, m, rounds and hashes; two fresh workers fetch the state.
    const second = await createRoom({ workers: 2, resumeFrom: loaded });
    expect(second.host.fragmentStates()).toEqual(saved.state.fragments.map((f, fragment) => ({ fragment, ...f })));
    expect(second.host.coordinator.roomTokens).toBe(saved.state.roomTokens);
    const opens = second.spy(second.hostMember, 'round-open');
    second.startAll();
    await second.finish(3_000);
    for (const [p, f] of saved.state.fragments.entries()) {
      const rounds = opens.filter((o) => o.message.fragment === p).map((o) => o.message.round);
      expect(rounds[0], `fragment ${p}'s first round after the resume`).toBe(f.round + 1);
      expect(rounds.length).toBeGreaterThanOrEqual(2);
      // it opens at the saved tokens, so the workers continue the learning-rate schedule
      expect(must(opens.find((o) => o.message.fragment === p)).message.roomTokens).toBeGreaterThanOrEqual(
        saved.state.roomTokens,
      );
    }
    expect(second.aborted()).toEqual([]);
    const states = second.host.fragmentStates();
    for (const w of second.workers) expect(replicaStates(w.worker)).toEqual(states);
    expect(states.every((f, p) => f.round > must(saved.state.fragments[p]).round)).toBe(true);
    expect(second.host.coordinator.committedRounds).toBe(saved.state.committedRounds + second.committed().length);
    expect(await evaluate(second.config, second.host.params())).toBeLessThan(savedLoss);
  }, 60_000);

  it('refuses a pair of files that are not from the same save, and a run state that is not a room', async () => {
    const room = await createRoom({ workers: 2 });
    room.startAll();
    await room.finish(1_500);
    const saved = roomCheckpointOf(room.host);
    const momentum = saved.momentum.slice();
    momentum[3] = (momentum[3] as number) + 1e-3;
    await expect(
      Host.create({
        member: room.hostMember,
        config: room.config,
        params: saved.params,
        momentum,
        resume: saved.state,
      }),
    ).rejects.toThrow(/fragment 0: the weights and momentum hash to [0-9a-f]+, the run state says/);

    const files = encodeRoomCheckpoint(saved);
    const notRoom = encodeRoomCheckpoint({
      ...saved,
      state: { ...saved.state, fragments: [] } as unknown as typeof saved.state,
    });
    expect(() => decodeRoomCheckpoint(files.weights, notRoom.state)).toThrow(CheckpointError);
    expect(() => decodeRoomCheckpoint(files.weights, notRoom.state)).toThrow(/run state is not a room's: fragments/);
    expect(() => decodeRoomCheckpoint(files.weights, files.weights)).toThrow(/run state has no outer\.m/);
  }, 30_000);

  it('a host that crashes and comes back from an older checkpoint: its workers stay, fetch θ_global and rounds go on', async () => {
    const room = await createRoom({ workers: 2 });
    const { clock, network, config, workers } = room;
    room.startAll();
    await clock.runAsync({ until: 1_500 });
    const saved = roomCheckpointOf(room.host);
    await clock.runAsync({ until: 2_000 });
    // The workers moved past the checkpoint: their replicas hold later rounds than it does.
    const ahead = replicaStates(must(workers[0]).worker);
    expect(ahead?.some((f, p) => f.round > must(saved.state.fragments[p]).round)).toBe(true);
    network.crash('host');
    await clock.runAsync({ until: 2_500 });
    const stepsAtReturn = workers.map((w) => w.worker.metrics.innerStep);
    expect(stepsAtReturn.every((steps) => steps > 0)).toBe(true);

    const member = room.memberFor('host');
    const opens = room.spy(member, 'round-open');
    const commits = room.spy(member, 'commit');
    const transfers = workers.map((w) => room.spy(w.member, 'state-transfer'));
    const host = await Host.create({
      member,
      config,
      params: saved.params,
      momentum: saved.momentum,
      resume: saved.state,
      deadlineMs: 5_000,
    });
    await clock.runAsync({ until: 6_500 });
    for (const w of workers) w.worker.stop();
    await clock.runAsync({ until: 7_500 });
    await Promise.all(workers.map((w) => w.running));

    // Both workers came back without rejoining: the host's state went to each, rounds go on from the save.
    for (const log of transfers) expect(log.length).toBeGreaterThan(0);
    for (const [p, f] of saved.state.fragments.entries()) {
      expect(must(opens.find((o) => o.message.fragment === p)).message.round).toBe(f.round + 1);
    }
    const both = commits.filter((c) => c.message.contributors.length === 2);
    expect(both.length).toBeGreaterThanOrEqual(4);
    const states = host.fragmentStates();
    for (const w of workers) expect(replicaStates(w.worker)).toEqual(states);
    // Their steps count on from the save, the ones trained while the host was away included, each
    // once; the room's step goes on from the saved one.
    const perStep = config.train.batchSize * config.train.seqLen;
    const atSave = workers.map((w) => must(saved.state.members?.[w.peer]).innerStep);
    const sinceSave = (steps: number[]) => steps.reduce((n, step, i) => n + step - must(atSave[i]), 0);
    const final = workers.map((w) => w.worker.metrics.innerStep);
    expect(host.coordinator.roomTokens).toBeGreaterThan(saved.state.roomTokens + sinceSave(stepsAtReturn) * perStep);
    expect(host.coordinator.roomTokens).toBeLessThanOrEqual(saved.state.roomTokens + sinceSave(final) * perStep);
    expect(host.coordinator.step()).toBeGreaterThan(
      must(saved.state.step) + (final[0] as number) - must(atSave[0]) - 10,
    );
  }, 60_000);

  it('keeps the steps of at most MAX_MEMBERS workers, those in the room first, so it always reads back', async () => {
    const first = await createRoom({ workers: 1 });
    first.startAll();
    await first.finish(1_000);
    const saved = roomCheckpointOf(first.host);
    const away = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`gone-${i}`, { innerStep: i, step: i }]));
    const second = await createRoom({ workers: 1, resumeFrom: { ...saved, state: { ...saved.state, members: away } } });
    second.startAll();
    await second.finish(1_000);
    const again = roomCheckpointOf(second.host);
    const members = Object.keys(again.state.members ?? {});
    expect(members).toHaveLength(MAX_MEMBERS);
    expect(members[0]).toBe('w0');
    const files = encodeRoomCheckpoint(again);
    expect(decodeRoomCheckpoint(files.weights, files.state).state.members).toEqual(again.state.members);
  }, 30_000);

  it('keeps no credentials: a run state from before carries its secret in, and goes out without it', async () => {
    const room = await createRoom({ workers: 1 });
    const saved = roomCheckpointOf(room.host);
    // an older host wrote the signaling room's credentials into the run state
    const legacy = encodeState(
      buildLayout(room.config.model),
      { 'outer.m': saved.momentum },
      { ...saved.state, room: ROOM },
    );
    const files = encodeRoomCheckpoint(saved);
    expect(contains(legacy, ROOM.hostSecret)).toBe(true);
    const loaded = decodeRoomCheckpoint(files.weights, legacy);
    expect(loaded.state.room).toEqual(ROOM); // read, so that `shoal host --resume` can take its room back
    const rewritten = encodeRoomCheckpoint(loaded);
    for (const secret of [ROOM.hostSecret, ROOM.joinToken]) {
      expect(contains(rewritten.state, secret)).toBe(false);
      expect(contains(rewritten.weights, secret)).toBe(false);
    }
    expect(decodeRoomCheckpoint(rewritten.weights, rewritten.state).state).toEqual({ ...saved.state, room: null });
  });

  it('saves at every commit the host adopts, one write at a time; commits during a write coalesce into one more', async () => {
    /** A room of 2 workers for 3 s (a commit every ~500 ms) whose saver's writes take `writeMs`. */
    const run = async (writeMs: number) => {
      const commits: { at: number; fragment: number; round: number }[] = [];
      const writes: { startedAt: number; endedAt: number; rounds: number[] }[] = [];
      let clockNow = () => 0;
      const room = await createRoom({
        workers: 2,
        onEvent: (event: CoordinatorEvent) => {
          if (event.event === 'round-committed') commits.push({ at: clockNow(), ...event });
        },
      });
      const { clock } = room;
      clockNow = () => clock.now();
      let writing = 0;
      const saver = new RoomCheckpointSaver(room.host, async (checkpoint: RoomCheckpoint) => {
        writing++;
        expect(writing, 'writes at once').toBe(1);
        const startedAt = clock.now();
        await clock.sleep(writeMs);
        writes.push({ startedAt, endedAt: clock.now(), rounds: checkpoint.state.fragments.map((f) => f.round) });
        writing--;
      });
      room.startAll();
      await room.finish(3_000);
      await clock.runAsync({ until: clock.now() + 2 * writeMs });
      await saver.settled();
      saver.close();
      return { room, commits, writes };
    };

    const fast = await run(20);
    const slow = await run(1_500);
    expect(fast.commits.length).toBeGreaterThanOrEqual(4);
    // a write's duration never holds up a round: both rooms commit the same rounds at the same times
    expect(slow.commits).toEqual(fast.commits);
    // every commit is on disk within one write of it, or two when it landed during one
    for (const { commits, writes } of [fast, slow]) {
      const writeMs = must(writes[0]).endedAt - must(writes[0]).startedAt;
      for (const commit of commits) {
        const saved = writes.find((w) => (w.rounds[commit.fragment] as number) >= commit.round);
        expect(saved, `fragment ${commit.fragment} round ${commit.round}`).toBeDefined();
        expect(must(saved).endedAt - commit.at).toBeLessThanOrEqual(2 * writeMs);
      }
      const last = must(writes.at(-1)).rounds;
      expect(last).toEqual(fast.room.host.fragmentStates().map((f) => f.round));
    }
    // fast writes: one per commit; slow ones: the commits that landed during a write share the next
    expect(fast.writes.length).toBe(fast.commits.length);
    expect(slow.writes.length).toBeLessThan(slow.commits.length);
  }, 60_000);

  it('writes again after a failed write, and on request whether or not θ_global moved', async () => {
    const room = await createRoom({ workers: 1 });
    const written: number[][] = [];
    const errors: unknown[] = [];
    let failNext = true;
    const saver = new RoomCheckpointSaver(
      room.host,
      async (checkpoint) => {
        if (failNext) {
          failNext = false;
          throw new Error('disk full');
        }
        written.push(checkpoint.state.fragments.map((f) => f.round));
      },
      (error) => errors.push(error),
    );
    saver.request(); // the first save fails
    await saver.settled();
    expect(errors).toEqual([new Error('disk full')]);
    expect(written).toEqual([]);
    saver.request(); // nothing moved, but nothing is on disk either
    await saver.settled();
    expect(written).toEqual([[0, 0]]);
    saver.request(); // on disk, and θ_global has not moved
    await saver.settled();
    expect(written).toHaveLength(1);
    saver.request(true);
    saver.request(true); // lands during the write above: once more after it
    saver.request(true); // coalesces with the one before
    await saver.settled();
    expect(written).toHaveLength(3);
  });
});

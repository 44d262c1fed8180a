/**
 * A host joins the mesh before its coordinator listens (`shoal host` checks its checkpoint and
 * builds its replica after its links are up), and what arrives in between is dropped: a worker
 * whose hello went that way says it again, whether it is joining or its host came back.
 */

import { roomCheckpointOf } from '@shoal/room';
import { createRoom, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import { Host } from './host.ts';

describe('a hello the host dropped while it was setting up', () => {
  it('is said again by a worker whose host came back: its refused heartbeat says it is no member', async () => {
    const room = await createRoom({ workers: 2 });
    const { clock, network, config, workers } = room;
    room.startAll();
    await clock.runAsync({ until: 1_500 });
    const saved = roomCheckpointOf(room.host);
    network.crash('host');
    await clock.runAsync({ until: 2_500 });
    const member = room.memberFor('host');
    const hellos = room.spy(member, 'hello');
    await clock.runAsync({ until: 3_000 });
    expect(hellos.map((h) => h.from).sort()).toEqual(['w0', 'w1']);
    const commits = room.spy(member, 'commit');
    const host = await Host.create({
      member,
      config,
      params: saved.params,
      momentum: saved.momentum,
      resume: saved.state,
      deadlineMs: 5_000,
    });
    await clock.runAsync({ until: 7_000 });
    for (const w of workers) w.worker.stop();
    await clock.runAsync({ until: 8_000 });
    await Promise.all(workers.map((w) => w.running));

    expect(
      hellos
        .filter((h) => h.at > 3_000)
        .map((h) => h.from)
        .sort(),
    ).toEqual(['w0', 'w1']);
    expect(commits.filter((c) => c.message.contributors.length === 2).length).toBeGreaterThanOrEqual(4);
    const states = host.fragmentStates();
    for (const w of workers) expect(replicaStates(w.worker)).toEqual(states);
  }, 60_000);

  it('is said again by a joining worker until a welcome comes', async () => {
    const room = await createRoom({ workers: 0 });
    const { clock, network, config } = room;
    network.crash('host'); // the room's host is replaced by one that listens late
    const w0 = room.addWorker();
    room.start(w0);
    const member = room.memberFor('host');
    const hellos = room.spy(member, 'hello');
    await clock.runAsync({ until: 1_000 });
    expect(hellos.map((h) => h.from)).toEqual(['w0']);
    const commits = room.spy(member, 'commit');
    const host = await Host.create({ member, config, deadlineMs: 5_000 });
    await room.finish(6_000);

    expect(hellos.length).toBeGreaterThan(1);
    expect(commits.length).toBeGreaterThanOrEqual(2);
    expect(replicaStates(w0.worker)).toEqual(host.fragmentStates());
  }, 60_000);
});

/**
 * A pipeline-parallel room over real connections, in one process (docs/pipeline.md): the
 * signaling server, a host and four CPU workers, each with its own signaling socket and a
 * @roamhq/wrtc mesh, exactly as `shoal host --pipeline-stages 2` and `shoal worker` wire them. The
 * coordinator forms two replica groups of two stages; activations and their gradients cross the
 * mesh every micro-batch. Then one stage worker crashes without a goodbye: its group stops, a
 * fifth worker takes the empty slot, and the group trains on.
 */
import { createRunConfig } from '@shoal/room/run-config';
import type { MeshStageTrainer } from '@shoal/swarm';
import { afterAll, describe, expect, it } from 'vitest';
import { openWebrtcRoom, until } from './test-webrtc-room.ts';
import type { RoomWorker } from './worker.ts';

const config = {
  ...createRunConfig({
    preset: 'nano',
    train: { batchSize: 4, seqLen: 64, maxLr: 3e-3, warmupSteps: 10, totalSteps: 600, seed: 1 },
    diloco: { innerSteps: 8, fragments: 2 },
    heartbeatMs: 250,
  }),
  pipeline: { stages: 2, micros: 2, schedule: '1f1b', activations: 'bf16' } as const,
};

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
});

const stageOf = (w: RoomWorker) => (w.worker as unknown as { trainer: MeshStageTrainer | null }).trainer;

describe('a pipeline-parallel room over real WebRTC', () => {
  it('host + 4 workers form 2 replicas of 2 stages and train nano; a crashed stage worker is replaced', {
    timeout: 240_000,
  }, async () => {
    const { host, events, evaluate, join, committed } = await openWebrtcRoom(config, cleanups);
    const initialLoss = await evaluate();
    const workers: RoomWorker[] = [];
    for (let i = 0; i < 4; i++) workers.push(await join());
    const groups = host.coordinator.groups;
    if (!groups) throw new Error('the host formed no groups');
    await until(() => groups.list().filter((g) => g.slots.every(Boolean)).length === 2, 30_000, 'two full groups');
    // each fragment (nano's block p) is stage p's: its rounds commit with that stage of both groups
    await until(
      () => committed(0).filter((e) => e.participants === 2).length >= 2 && committed(1).length >= 2,
      120_000,
      'two commits of each fragment by both groups',
    );
    for (const w of workers) expect(stageOf(w)?.counters.refused).toBe(0);

    // The victim: stage 1 of group 0. Its group waits; a fifth worker takes its slot.
    const [group0] = groups.list();
    const victimPeer = group0?.slots[1] as string;
    const victim = workers.find((w) => w.joined.peerId === victimPeer) as RoomWorker;
    const partner = workers.find((w) => w.joined.peerId === group0?.slots[0]) as RoomWorker;
    victim.worker.stop();
    victim.link.mesh.testing.crash();
    victim.link.signal.close();
    await until(
      () => events.some((e) => e.event === 'peer-left' && e.peer === victimPeer),
      30_000,
      'the victim to leave',
    );
    const partnerSteps = stageOf(partner)?.counters.steps ?? 0;
    const replacement = await join();
    const newcomer = replacement.joined.peerId;
    await until(() => groups.slot(newcomer)?.group === 0 && groups.complete(newcomer), 30_000, 'the slot filled');
    expect(groups.slot(newcomer)?.stage).toBe(1);
    const commitsBefore = committed(1).length;
    await until(
      () => (stageOf(partner)?.counters.steps ?? 0) > partnerSteps + 20 && committed(1).length >= commitsBefore + 2,
      120_000,
      'the re-formed group to train and fragment 1 to commit twice more',
    );
    expect(stageOf(replacement)?.counters.steps).toBeGreaterThan(10);
    const alive = [...workers.filter((w) => w !== victim), replacement];
    for (const w of alive) w.worker.stop();
    await Promise.all(alive.map((w) => w.running));
    expect(host.params().every(Number.isFinite)).toBe(true);
    const finalLoss = await evaluate();
    expect(finalLoss).toBeLessThan(initialLoss - 0.5);
    const bytes = alive.map((w) => stageOf(w)?.counters.activationBytesSent ?? 0);
    console.log(
      `2 groups × 2 stages over WebRTC: ${committed().length} commits, eval ${initialLoss.toFixed(3)} → ` +
        `${finalLoss.toFixed(3)}; activation bytes sent per worker ${bytes.join(', ')}`,
    );
  });
});

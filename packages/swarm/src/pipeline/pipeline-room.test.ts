import { buildLayout, initParameters } from '@shoal/model';
import { createRoom, evaluate, must } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import type { MeshStageTrainer } from './mesh-stage.ts';

const pipeline = { stages: 2, micros: 2, schedule: '1f1b', activations: 'f32' } as const;

describe('a pipeline-parallel room on the simulated mesh', () => {
  it('forms two groups of two stages, syncs each stage across groups, and trains', async () => {
    const room = await createRoom({ workers: 4, pipeline, spec: () => ({ computeMsPerStep: 20 }) });
    const opens = room.spy(room.hostMember, 'round-open');
    room.startAll();
    await room.finish(8_000);
    const places = room.workers.map((w) => (w.worker as unknown as { trainer: MeshStageTrainer }).trainer?.place);
    expect(places.map((p) => p && [p.group, p.stage])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    // fragment p is nano's block p: stage p holds it, so its rounds name that stage of each group
    for (const p of [0, 1]) {
      const rounds = opens.filter((o) => o.message.fragment === p);
      expect(rounds.length, `rounds of fragment ${p}`).toBeGreaterThanOrEqual(3);
      for (const o of rounds) expect(o.message.participants).toEqual(p === 0 ? ['w0', 'w2'] : ['w1', 'w3']);
    }
    expect(room.committed().length).toBeGreaterThanOrEqual(6);
    expect(room.aborted()).toEqual([]);
    // a group's two stages train one batch a step: the room counts it once
    const { coordinator } = room.host;
    const steps = [...coordinator.members.values()].reduce((sum, m) => sum + m.innerStep, 0);
    expect(coordinator.roomTokens).toBe((steps * room.config.train.batchSize * room.config.train.seqLen) / 2);
    const init = await evaluate(room.config, initParameters(buildLayout(room.config.model), room.config.train.seed));
    const trained = await evaluate(room.config, room.host.params());
    expect(trained).toBeLessThan(init - 0.5);
    const counters = room.workers.map(
      (w) => must((w.worker as unknown as { trainer: MeshStageTrainer }).trainer).counters,
    );
    for (const c of counters) {
      expect(c.steps).toBeGreaterThan(50);
      expect(c.refused).toBe(0);
    }
  }, 120_000);
});

describe('a pipeline-parallel room that loses a stage worker', () => {
  it('stops that group, places a newcomer in the empty slot, and the group trains on', async () => {
    const room = await createRoom({ workers: 4, pipeline, detectionMs: 500, spec: () => ({ computeMsPerStep: 20 }) });
    const { network, clock } = room;
    const opens = room.spy(room.hostMember, 'round-open');
    const victim = must(room.workers[1]);
    const trainer = (i: number) =>
      must((must(room.workers[i]).worker as unknown as { trainer: MeshStageTrainer }).trainer);
    room.startAll();
    let stepsAtCrash = 0;
    clock.schedule(3_000, () => {
      stepsAtCrash = trainer(0).counters.steps;
      network.crash(victim.peer);
    });
    clock.schedule(4_000, () => room.start(room.addWorker()));
    await room.finish(12_000);

    expect(room.events).toContainEqual({ event: 'peer-left', peer: victim.peer, reason: 'crashed' });
    expect(trainer(4).place).toMatchObject({ group: 0, stage: 1 });
    expect(trainer(0).counters.interrupted).toBeGreaterThanOrEqual(1);
    expect(trainer(0).counters.steps).toBeGreaterThan(stepsAtCrash + 20);
    expect(trainer(4).counters.steps).toBeGreaterThan(20);
    // fragment 1's rounds name the newcomer once it has synced
    const later = opens.filter((o) => o.message.fragment === 1 && o.message.participants.includes('w4'));
    expect(later.length).toBeGreaterThanOrEqual(2);
    expect(room.committed().filter((e) => e.fragment === 1 && e.round > 0).length).toBeGreaterThanOrEqual(4);
    for (const i of [0, 2, 3, 4]) expect(trainer(i).counters.refused).toBe(0);
  }, 120_000);
});

describe('a pipeline-parallel room and a volunteer with too little memory', () => {
  it('places it in no stage and says why; it trains nothing', async () => {
    const room = await createRoom({ workers: 2, pipeline, spec: () => ({ computeMsPerStep: 20 }) });
    const small = room.addWorker();
    (small.worker as unknown as { options: { capabilities: object } }).options.capabilities = {
      backend: 'cpu',
      adapter: 'test',
      tokensPerSecond: 1000,
      memoryBytes: 1000,
    };
    room.startAll();
    await room.finish(2_000);
    const info = room.host.coordinator.members.get(small.peer);
    expect(info?.reason).toMatch(/holds no pipeline stage \(the smallest needs [\d.]+ [KM]iB\)/);
    const stage = must((small.worker as unknown as { trainer: MeshStageTrainer }).trainer);
    expect(stage.place).toBeNull();
    expect(stage.waiting).toMatch(/holds no pipeline stage/);
    expect(stage.counters.steps).toBe(0);
    expect(room.host.coordinator.groups?.list().map((g) => g.slots)).toEqual([['w0', 'w1']]);
  }, 60_000);
});

describe('a stage facing a hostile group member or stranger', () => {
  it('refuses and counts pipe messages from outside its group, from the wrong stage, of the wrong size', async () => {
    const room = await createRoom({ workers: 4, pipeline, spec: () => ({ computeMsPerStep: 20 }) });
    const { clock } = room;
    room.startAll();
    await clock.runAsync({ until: 2_000 });
    const target = must(room.workers[1]); // group 0, stage 1
    const stage = must((target.worker as unknown as { trainer: MeshStageTrainer }).trainer);
    const place = must(stage.place);
    const body = {
      kind: 'pipe',
      group: place.group,
      version: place.version,
      step: 1_000_000,
      micro: 0,
      dtype: 'f32',
      targets: 0,
    } as const;
    const rows = (room.config.train.batchSize / pipeline.micros) * room.config.train.seqLen;
    const values = rows * room.config.model.nEmbd;
    const send = (from: number, message: object) =>
      void must(room.workers[from]).member.send(target.peer, message as never);
    // a stranger to the group (group 1's stage 0), the right shape
    send(2, { ...body, what: 'act', values, targets: rows, payload: new Uint8Array(values * 4 + rows * 4) });
    // its own stage 0, a grad (stage 0 never sends one to stage 1)
    send(0, { ...body, what: 'grad', values, payload: new Uint8Array(values * 4) });
    // its own stage 0, activations of the wrong size
    send(0, { ...body, what: 'act', values: 8, targets: rows, payload: new Uint8Array(8 * 4 + rows * 4) });
    const before = stage.counters.refused;
    await clock.runAsync({ until: 2_500 });
    expect(stage.counters.refused - before).toBe(3);
    const reasons = target.member.counters.recent().map((r) => r.detail);
    expect(reasons.some((d) => /w2 holds no stage of this group/.test(d))).toBe(true);
    expect(reasons.some((d) => /stage 0 does not send grad to stage 1/.test(d))).toBe(true);
    expect(reasons.some((d) => /act: 8 f32 values and 128 targets, expected 8192 f32 and 128/.test(d))).toBe(true);
    // and the group trains on
    const steps = stage.counters.steps;
    await room.finish(4_000);
    expect(stage.counters.steps).toBeGreaterThan(steps + 5);
  }, 60_000);
});

describe('a stage worker the coordinator places again in another stage', () => {
  it('follows the new stage: its fragments fetched, the old ones released, its engine rebuilt from θ_global', async () => {
    const room = await createRoom({ workers: 4, pipeline, detectionMs: 500, spec: () => ({ computeMsPerStep: 20 }) });
    const { network, clock } = room;
    const stageOfWorker = (i: number) =>
      must((must(room.workers[i]).worker as unknown as { trainer: MeshStageTrainer }).trainer);
    room.startAll();
    // w1 (group 0, stage 1) loses the host and w4 takes its slot; w2 (group 1, stage 0) crashes;
    // back, w1 holds stage 1's state but only group 1's stage 0 is free
    clock.schedule(2_000, () => network.partition('host', 'w1'));
    clock.schedule(2_500, () => room.start(room.addWorker()));
    clock.schedule(3_000, () => network.crash('w2'));
    let stepsBack = 0;
    clock.schedule(4_000, () => {
      stepsBack = stageOfWorker(1).counters.steps;
      network.heal('host', 'w1');
    });
    await clock.runAsync({ until: 2_000 });
    expect(stageOfWorker(1).place?.stage).toBe(1);
    // a stage worker holds its own stage's outer state only (nano: fragment p is stage p)
    const state = must(room.workers[1]?.worker.replica).state;
    expect(state.fragment(0).theta.length).toBe(0);
    expect(state.fragment(1).theta.length).toBe(state.fragment(1).fragment.size);
    await room.finish(12_000);
    const moved = stageOfWorker(1);
    expect(moved.place).toMatchObject({ group: 1, stage: 0 });
    expect(moved.counters.steps).toBeGreaterThan(stepsBack + 20);
    expect(state.fragment(0).theta.length).toBe(state.fragment(0).fragment.size);
    expect(state.fragment(1).theta.length).toBe(0);
    expect(state.fragment(0).hash).toBe(room.host.fragmentStates()[0]?.hash);
    // its stage-0 range came from θ_global, not from the zeros outside its old stage
    const params = await room.localParams(must(room.workers[1]));
    const wte = params.subarray(0, room.config.model.vocabSize * room.config.model.nEmbd);
    expect(wte.some((x) => x !== 0)).toBe(true);
    expect(params.every(Number.isFinite)).toBe(true);
    expect(stageOfWorker(3).place).toMatchObject({ group: 1, stage: 1 });
    expect(stageOfWorker(4).place).toMatchObject({ group: 0, stage: 1 });
    for (const i of [0, 1, 3, 4]) expect(stageOfWorker(i).counters.refused).toBe(0);
  }, 120_000);
});

describe('a pipeline-parallel room on GPipe with bf16 activations', () => {
  it('trains, with half the activation bytes of f32', async () => {
    const run = async (activations: 'f32' | 'bf16') => {
      const room = await createRoom({
        workers: 2,
        pipeline: { ...pipeline, schedule: 'gpipe', activations },
        spec: () => ({ computeMsPerStep: 20 }),
      });
      room.startAll();
      await room.finish(5_000);
      const stages = room.workers.map((w) => must((w.worker as unknown as { trainer: MeshStageTrainer }).trainer));
      const steps = must(stages[0]).counters.steps;
      const bytes = must(stages[0]).counters.activationBytesSent;
      const init = await evaluate(room.config, initParameters(buildLayout(room.config.model), room.config.train.seed));
      return { steps, perStep: bytes / steps, loss: await evaluate(room.config, room.host.params()), init };
    };
    const f32 = await run('f32');
    const bf16 = await run('bf16');
    expect(bf16.loss).toBeLessThan(bf16.init - 0.5);
    // stage 0 sends M micro-batches of activations (and their targets) a step; the step in flight
    // at the end has sent some of its own
    const rows = 2 * 64; // micro-batch 2 × T 64
    for (const [run, bytes] of [
      [f32, 4],
      [bf16, 2],
    ] as const) {
      const exact = 2 * (rows * 64 * bytes + rows * 4);
      expect(run.perStep).toBeGreaterThanOrEqual(exact);
      expect(run.perStep).toBeLessThan(exact * (1 + 2 / run.steps));
    }
  }, 120_000);
});

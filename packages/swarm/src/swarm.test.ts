import { BatchSampler, loadMobyDick, splitCorpus, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { createWireCodec } from '@shoal/protocol';
import { describe, expect, it } from 'vitest';
import { createRunConfig } from './config.ts';
import type { CoordinatorEvent } from './coordinator.ts';
import { Host } from './host.ts';
import { Member } from './member.ts';
import { SimNetwork, VirtualClock } from './sim/index.ts';
import { Worker } from './worker.ts';

const RUN = 7;
const corpus = splitCorpus(loadMobyDick());

async function room(options: { workers: number; stepMs?: (i: number) => number; innerSteps?: number }) {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 20, upMbps: 50, downMbps: 50 });
  const codec = await createWireCodec();
  const config = createRunConfig({
    preset: 'nano',
    train: { batchSize: 4, seqLen: 64, maxLr: 3e-3, warmupSteps: 10, totalSteps: 400, seed: 1 },
    diloco: { innerSteps: options.innerSteps ?? 10, fragments: 2 },
    heartbeatMs: 200,
  });
  const events: CoordinatorEvent[] = [];
  const host = await Host.create({
    member: new Member(network.join('host'), codec, clock, RUN),
    config,
    deadlineMs: 5_000,
    onEvent: (event) => events.push(event),
  });
  const workers = Array.from({ length: options.workers }, (_, i) => {
    const sampler = new BatchSampler(corpus.train, { batchSize: 4, seqLen: 64, seed: 1, worker: i });
    return new Worker({
      member: new Member(network.join(`w${i}`), codec, clock, RUN),
      coordinator: 'host',
      capabilities: { backend: 'cpu', adapter: 'test', tokensPerSecond: 1000 },
      createTrainer: async (run, params) => new CpuTrainer(run.model, run.train, params),
      nextBatch: () => sampler.next(),
      stepMs: () => options.stepMs?.(i) ?? 100,
    });
  });
  return { clock, network, config, host, workers, events };
}

async function evaluate(config: ReturnType<typeof createRunConfig>, params: Float32Array): Promise<number> {
  const trainer = new CpuTrainer(config.model, config.train, params);
  return trainer.evaluate(validationBatches(corpus.validation, { batchSize: 4, seqLen: 64, count: 8 }));
}

describe('a room of 4 workers and a host on the in-memory network', () => {
  it('commits rounds of both fragments, θ_global changes every commit, replicas agree and loss falls', {
    timeout: 120_000,
  }, async () => {
    const { clock, config, host, workers, events } = await room({ workers: 4 });
    const initialLoss = await evaluate(config, host.params());
    const running = workers.map((w) => w.join().then(() => w.run()));
    await clock.runAsync({ until: 12_000 });
    for (const w of workers) w.stop();
    await clock.runAsync({ until: 13_000 });
    await Promise.all(running);

    const commits = events.filter((e) => e.event === 'round-committed');
    for (const p of [0, 1]) {
      const hashes = commits.filter((e) => e.fragment === p).map((e) => (e.event === 'round-committed' ? e.hash : ''));
      expect(hashes.length, `fragment ${p} commits`).toBeGreaterThanOrEqual(3);
      expect(new Set(hashes).size).toBe(hashes.length);
    }
    expect(events.filter((e) => e.event === 'round-aborted')).toEqual([]);
    const hostStates = host.fragmentStates();
    for (const w of workers) {
      const states = w.replica?.state.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash }));
      expect(states).toEqual(hostStates);
    }
    const finalLoss = await evaluate(config, host.params());
    console.log(
      `θ_global validation loss ${initialLoss.toFixed(3)} → ${finalLoss.toFixed(3)}; ${commits.length} commits`,
    );
    expect(finalLoss).toBeLessThan(initialLoss - 1);
  });
});

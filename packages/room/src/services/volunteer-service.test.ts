import { describe, expect, it } from 'vitest';
import { corpus, createServiceRoom, STEP_MS } from './test-services.ts';
import { restAfterStep, trainerFor, workerIndexFor } from './volunteer-service.ts';

describe('the volunteer service', () => {
  it('trains in the room under its duty cycle, on its own batch stream, and leaves cleanly', async () => {
    const room = await createServiceRoom();
    room.service.start();
    const runs: string[] = [];
    // θ_global merged in must reach the engine that trains, not a copy of it
    const merges: boolean[] = [];
    const v0 = room.addVolunteer('v0', { onRun: (config) => runs.push(config.data.corpus) }, (engine) => {
      // a merge is written a fragment at a time where the engine can (writeRanges), else whole
      const setParams = engine.setParams.bind(engine);
      engine.setParams = function (this: unknown, next: Float32Array) {
        merges.push(this === engine);
        return setParams(next);
      };
      const writeRanges = engine.writeRanges?.bind(engine);
      if (writeRanges) {
        engine.writeRanges = function (this: unknown, ranges, values) {
          merges.push(this === engine);
          return writeRanges(ranges, values);
        };
      }
    });
    const running = v0.start();
    expect(v0.welcomed).toBe(false);
    await room.clock.runAsync({ until: 4_000 });
    expect(v0.welcomed).toBe(true);
    expect(runs).toEqual([corpus.name]);
    expect(room.committed().length).toBeGreaterThanOrEqual(1);
    expect(merges.length).toBeGreaterThan(0);
    expect(merges.every(Boolean)).toBe(true);
    // duty cycle 0.5: a step of STEP_MS, then as long a rest
    const { tokens, tokensPerSecond } = v0.worker.metrics;
    const { batchSize, seqLen } = room.config.train;
    expect(tokensPerSecond).toBeCloseTo((batchSize * seqLen * 1000) / (2 * STEP_MS));
    expect(tokens).toBeGreaterThan(0);

    const leaving = v0.leave('stopped', 3_000);
    await room.clock.runAsync({ until: 4_500 });
    await leaving;
    await running;
    expect(room.events).toContainEqual({ event: 'peer-left', peer: 'v0', reason: 'stopped' });
    v0.destroy();
  }, 60_000);

  it('reports why it cannot train when the text does not load', async () => {
    // `failure` is how a shell learns of it, and start() rejects with it; nothing is left unhandled
    const unhandled: unknown[] = [];
    const collect = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', collect);
    try {
      const room = await createServiceRoom();
      room.service.start();
      const v0 = room.addVolunteer('v0', {
        loadCorpus: async () => {
          throw new Error('no such text');
        },
      });
      const started = v0.start();
      await room.clock.runAsync({ until: 1_000 });
      expect((await v0.failure).message).toBe('no such text');
      await expect(started).rejects.toThrow('no such text');
      expect(v0.welcomed).toBe(false);
      v0.destroy();
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', collect);
    }
  });

  it('draws a batch stream per peer id', () => {
    expect(workerIndexFor('peer-a')).toBe(workerIndexFor('peer-a'));
    expect(workerIndexFor('peer-a')).not.toBe(workerIndexFor('peer-b'));
    expect(workerIndexFor('peer-a')).toBeLessThan(0x10000);
  });

  it('trains on the CPU without a GPU device', async () => {
    const room = await createServiceRoom();
    const trainer = await trainerFor(null, room.config, room.service.host.params());
    expect(trainer.backend).toBe('cpu');
    trainer.destroy();
  });
});

describe('the duty-cycle cap', () => {
  it('rests so that busy / (busy + rest) is the duty cycle', () => {
    expect(restAfterStep(100, 1)).toBe(0);
    expect(restAfterStep(100, 0.5)).toBeCloseTo(100);
    expect(restAfterStep(100, 0.25)).toBeCloseTo(300);
    for (const duty of [0.1, 0.3, 0.7]) {
      const rest = restAfterStep(40, duty);
      expect(40 / (40 + rest)).toBeCloseTo(duty);
    }
  });
  it('clamps nonsense to 5 % … 100 %', () => {
    expect(restAfterStep(10, 0)).toBeCloseTo(190);
    expect(restAfterStep(10, 7)).toBe(0);
  });
});

/**
 * The simulator's results, bit for bit, against figures recorded from an earlier version: what
 * the simulator shares between the replicas of one process (decoded results, outer steps, the
 * init, a dry run's θ_local) is a matter of speed and must change no number. Each method runs a
 * small room (nano, 3 workers, 4 rounds per fragment) on the CPU engine; the final θ_global is
 * read where the simulator evaluates it (its evaluation trainer's parameters).
 */
import { createHash } from 'node:crypto';
import { corpusFromBytes, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { dryRunInputs, type MethodName, type MethodResult, type SimulateOptions, simulateMethod } from './simulate.ts';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });

const sha = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex').slice(0, 16);

/** What a run yields that any sharing could change: losses, curve, bytes, time, rounds, θ_global. */
interface Figures {
  evalLoss: number | null;
  curve: string;
  bytesPerWorker: number;
  peakSyncBytes: number;
  simSeconds: number;
  rounds: string;
  params: string | null;
}

function figures(result: MethodResult, params: Float32Array | null): Figures {
  return {
    evalLoss: result.evalLoss,
    curve: sha(JSON.stringify(result.curve)),
    bytesPerWorker: result.bytesPerWorker,
    peakSyncBytes: result.peakSyncBytes,
    simSeconds: result.simSeconds,
    rounds: `${result.committedRounds} (${result.abortedRounds})`,
    params: params ? sha(new Uint8Array(params.buffer, params.byteOffset, params.byteLength)) : null,
  };
}

async function run(method: MethodName, dryRun = false): Promise<Figures> {
  // the last engine the run makes is its evaluation's, on the final parameters
  let evaluated: Float32Array | null = null;
  const options: SimulateOptions = {
    preset: 'nano',
    workers: 3,
    batch: 2,
    seqLen: 16,
    lr: 3e-3,
    innerSteps: 5,
    fragments: 2,
    overlap: 1,
    alpha: 0.5,
    codec: 'fp4',
    lowRank: { rank: 4, target: 0 }, // low-rank rounds from each fragment's second on
    tokens: 3 * 2 * 16 * 20, // 20 inner steps per worker: 4 rounds per fragment
    seed: 1,
    stepMs: 20,
    gpuTflops: 10,
    linkMbps: 100,
    latencyMs: 10,
    dryRun: false,
    createTrainer: async (model, train, params) => {
      evaluated = params.slice();
      return new CpuTrainer(model, train, params);
    },
    trainTokens: corpus.train,
    evalBatches: validationBatches(corpus.validation, { batchSize: 2, seqLen: 16, count: 2 }),
    ...(dryRun ? dryRunInputs(16) : {}),
  };
  const result = await simulateMethod(method, options);
  return figures(result, dryRun ? null : evaluated);
}

/** Recorded from the simulator before its replicas shared anything beyond vectors. */
const GOLDEN: Record<string, Figures> = {
  dp: {
    evalLoss: 3.068258508080441,
    curve: 'db2a11e1f84d7df7',
    bytesPerWorker: 12861440,
    peakSyncBytes: 643072,
    simSeconds: 2.2289152000000003,
    rounds: '0 (0)',
    params: 'f94f47e88506d5fc',
  },
  diloco: {
    evalLoss: 3.017644790301416,
    curve: 'fd577266721e5d62',
    bytesPerWorker: 4520134.666666667,
    peakSyncBytes: 1128217,
    simSeconds: 1.09031992,
    rounds: '4 (0)',
    params: '6f13f764ee7546fe',
  },
  streaming: {
    evalLoss: 2.95064974828768,
    curve: '0c2458d3d8d48af5',
    bytesPerWorker: 4532854.666666667,
    peakSyncBytes: 660505,
    simSeconds: 1.16034184,
    rounds: '8 (0)',
    params: '51ff14a779468e14',
  },
  'streaming-fp4': {
    evalLoss: 2.9534099594462226,
    curve: 'a967dd4caa969a46',
    bytesPerWorker: 598340.6666666666,
    peakSyncBytes: 85821,
    simSeconds: 0.8103416,
    rounds: '8 (0)',
    params: '7a4692099811985e',
  },
  dilocox: {
    evalLoss: 2.9844064614318278,
    curve: 'c89a9bc27c66571f',
    bytesPerWorker: 198905,
    peakSyncBytes: 85821,
    simSeconds: 0.51034568,
    rounds: '8 (0)',
    params: 'f5bccbd3279a1bfb',
  },
  'streaming-fp4 dry': {
    evalLoss: null,
    curve: '4f6d56909927936a',
    bytesPerWorker: 598144.3333333334,
    peakSyncBytes: 85821,
    simSeconds: 0.81034216,
    rounds: '8 (0)',
    params: null,
  },
};

describe('shoal simulate, bit for bit', () => {
  for (const method of ['dp', 'diloco', 'streaming', 'streaming-fp4', 'dilocox'] as const) {
    it(`${method}: the recorded losses, bytes, time and final θ_global`, async () => {
      expect(await run(method)).toEqual(GOLDEN[method]);
    });
  }
  it('streaming-fp4, dry run: the recorded bytes, time and rounds', async () => {
    expect(await run('streaming-fp4', true)).toEqual(GOLDEN['streaming-fp4 dry']);
  });
});

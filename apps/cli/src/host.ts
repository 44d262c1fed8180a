/**
 * `shoal host --server URL`: creates a room on the signaling server and runs its host headless
 * (ARCHITECTURE.md, "The host is a replica"): the coordinator plus a replica of θ_global on a
 * WebRTC mesh with every member the server announces. It evaluates θ_global on fixed validation
 * batches with a CPU engine, writes θ_global as safetensors, and prints the join link; with
 * --json, one JSON line per event on stdout (see HostEvent).
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Batch, loadCorpus, validationBatches } from '@shoal/data';
import { buildLayout, CpuTrainer, encodeWeights } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { type CoordinatorEvent, createRunConfig, Host } from '@shoal/swarm';
import { connectSignaling, joinMesh, loadWrtc, serverBase, untilSignal } from './room.ts';
import { codecOption, presetOption, UsageError } from './usage.ts';

export interface HostCliOptions {
  server: string;
  preset: string;
  innerSteps: number;
  fragments: number;
  overlap: number;
  alpha: number;
  codec: string;
  lr: number;
  batch: number;
  steps: number;
  seed: number;
  data?: string;
  checkpointDir?: string;
  evalEveryMs: number;
  evalBatches: number;
  metricsEveryMs: number;
  deadlineMs: number;
  json?: boolean;
}

/** What `--json` prints, one object per line. */
export type HostEvent =
  | { event: 'room'; roomId: string; joinToken: string; joinUrl: string }
  | { event: 'peer-joined'; peer: string }
  | { event: 'peer-left'; peer: string; reason: string }
  | { event: 'round-committed'; fragment: number; round: number; participants: number; hash: string }
  | { event: 'round-aborted'; fragment: number; round: number; reason: string }
  | {
      event: 'metrics';
      step: number;
      tokens: number;
      trainLoss: number | null;
      evalLoss: number | null;
      tokensPerSecond: number;
      bytesSent: number;
      bytesReceived: number;
    }
  | { event: 'checkpoint'; path: string };

export const CHECKPOINT_NAME = 'shoal-room.safetensors';

function runConfigFrom(options: HostCliOptions): RunConfig {
  const model = presetOption(options.preset);
  const codec = codecOption(options.codec);
  if (!(options.alpha >= 0 && options.alpha <= 1)) throw new UsageError(`--alpha must lie in [0, 1]`);
  if (!(options.lr > 0)) throw new UsageError('--lr must be > 0');
  try {
    return createRunConfig({
      model,
      train: { batchSize: options.batch, maxLr: options.lr, totalSteps: options.steps, seed: options.seed },
      diloco: {
        innerSteps: options.innerSteps,
        fragments: options.fragments,
        overlap: options.overlap,
        alpha: options.alpha,
        codec,
      },
      // a worker loads the same corpus by this name: moby-dick, or the path it was given
      corpus: options.data ?? 'moby-dick',
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function hostCommand(options: HostCliOptions): Promise<void> {
  const config = runConfigFrom(options);
  const base = serverBase(options.server);
  let corpus: ReturnType<typeof loadCorpus>;
  try {
    corpus = loadCorpus({ data: options.data, seqLen: config.train.seqLen });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const evalBatches: Batch[] = validationBatches(corpus.validation, {
    batchSize: config.train.batchSize,
    seqLen: config.train.seqLen,
    count: options.evalBatches,
  });
  const wrtc = await loadWrtc();

  const print = (event: HostEvent, text: string) => {
    if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
    else console.log(text);
  };
  const onEvent = (event: CoordinatorEvent) => {
    switch (event.event) {
      case 'peer-joined':
        return print({ event: 'peer-joined', peer: event.peer }, `+ ${event.peer} joined`);
      case 'peer-left':
        return print(
          { event: 'peer-left', peer: event.peer, reason: event.reason },
          `- ${event.peer} left (${event.reason})`,
        );
      case 'round-committed': {
        const { fragment, round, participants, hash } = event;
        return print(
          { event: 'round-committed', fragment, round, participants, hash },
          `fragment ${fragment} round ${round} committed by ${participants}: ${hash.slice(0, 16)}`,
        );
      }
      case 'round-aborted': {
        const { fragment, round, reason } = event;
        return print(
          { event: 'round-aborted', fragment, round, reason },
          `fragment ${fragment} round ${round} aborted: ${reason}`,
        );
      }
      default:
        return; // round-opened: not part of the contract
    }
  };

  const signal = await connectSignaling(base);
  const room = await signal.create();
  const link = await joinMesh(signal, room, [], wrtc);
  const host = await Host.create({ member: link.member, config, onEvent, deadlineMs: options.deadlineMs });
  const joinUrl = `${base}/join/${room.roomId}?token=${room.joinToken}`;
  print(
    { event: 'room', roomId: room.roomId, joinToken: room.joinToken, joinUrl },
    `room ${room.roomId}: join with\n  ${joinUrl}\n  shoal worker --server ${base} --room ${room.roomId} --token ${room.joinToken}`,
  );

  // Evaluation of θ_global: one CPU engine, parameters swapped in for each evaluation.
  const layout = buildLayout(config.model);
  const evaluator = new CpuTrainer(config.model, config.train, host.params());
  let evalLoss: number | null = null;
  let lastEvaluatedHashes = '';
  const writeCheckpoint = (params: Float32Array) => {
    if (!options.checkpointDir) return;
    mkdirSync(options.checkpointDir, { recursive: true });
    const path = join(options.checkpointDir, CHECKPOINT_NAME);
    writeFileSync(`${path}.tmp`, encodeWeights(layout, params));
    renameSync(`${path}.tmp`, path); // a reader never sees half a file
    print({ event: 'checkpoint', path }, `checkpoint: ${path}`);
  };
  const evaluate = async () => {
    const hashes = host
      .fragmentStates()
      .map((f) => f.hash)
      .join();
    if (hashes === lastEvaluatedHashes && evalLoss !== null) return false; // θ_global has not moved
    lastEvaluatedHashes = hashes;
    const params = host.params();
    await evaluator.setParams(params);
    const loss = await evaluator.evaluate(evalBatches);
    evalLoss = Number.isFinite(loss) ? loss : null;
    writeCheckpoint(params);
    return true;
  };
  const metrics = () => {
    const { coordinator } = host;
    const members = [...coordinator.members.values()];
    const losses = members.map((m) => m.loss).filter((loss): loss is number => loss !== null);
    const trainLoss = losses.length === 0 ? null : losses.reduce((a, b) => a + b, 0) / losses.length;
    const tokensPerSecond = members.reduce((sum, m) => sum + m.tokensPerSecond, 0);
    const event = {
      event: 'metrics' as const,
      step: coordinator.medianStep,
      tokens: coordinator.roomTokens,
      trainLoss,
      evalLoss,
      tokensPerSecond,
      bytesSent: link.member.bytesSent,
      bytesReceived: link.member.bytesReceived,
    };
    print(
      event,
      `step ${event.step}  tokens ${event.tokens}  train ${trainLoss?.toFixed(4) ?? '—'}  eval ${evalLoss?.toFixed(4) ?? '—'}  ` +
        `${tokensPerSecond.toFixed(0)} tok/s  ${members.length} members`,
    );
  };

  let evaluating: Promise<unknown> = Promise.resolve();
  const evalTimer = setInterval(() => {
    evaluating = evaluating.then(evaluate).then(
      (changed) => changed && metrics(),
      (error) => console.error('shoal: evaluation failed:', error),
    );
  }, options.evalEveryMs);
  const metricsTimer = setInterval(metrics, options.metricsEveryMs);
  evaluating = evaluate().then(metrics);

  const closedBy = await Promise.race([
    untilSignal(),
    new Promise<string>((resolve) =>
      signal.on('close', ({ code }) => resolve(`the signaling socket closed (${code})`)),
    ),
  ]);
  clearInterval(evalTimer);
  clearInterval(metricsTimer);
  await evaluating;
  if (!options.json) console.error(`shoal: stopping (${closedBy})`);
  writeCheckpoint(host.params());
  evaluator.destroy();
  await link.close();
  if (!closedBy.startsWith('SIG')) throw new Error(closedBy);
}

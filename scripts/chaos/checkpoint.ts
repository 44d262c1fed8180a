/**
 * Does the host's checkpoint load? What `shoal host --resume DIR` reads, checked the way the run
 * needs it: both files decode (decodeRoomCheckpoint), θ_global and m are finite, each fragment's
 * hash recomputed from the weights and momentum equals the one the run state names (what
 * Host.create insists on), and θ_global's validation loss on a few fixed batches is finite.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Batch, loadCorpus, validationBatches } from '@shoal/data';
import { buildFragments, createFragmentHasher, gatherFragment } from '@shoal/diloco';
import { buildLayout, CpuTrainer } from '@shoal/model';
import { decodeRoomCheckpoint } from '@shoal/room';
import { CHECKPOINT_NAME, STATE_NAME } from '../../apps/cli/src/host-resume.ts';

export interface CheckpointCheck {
  ok: boolean;
  /** Why it does not load, or what is wrong in it (null when ok). */
  error: string | null;
  /** Each fragment's (round, hash) in the run state. */
  fragments: { round: number; hash: string }[];
  roomTokens: number;
  /** Non-finite values in θ_global and m. */
  nonFinite: number;
  /** Fragments whose recomputed hash differs from the run state's. */
  hashMismatches: number;
  /** Validation loss of θ_global (null when it did not load). */
  evalLoss: number | null;
}

const EVAL_BATCHES = 2;
let batches: { key: string; batches: Batch[] } | null = null;

function evalBatchesFor(batchSize: number, seqLen: number): Batch[] {
  const key = `${batchSize}x${seqLen}`;
  if (batches?.key !== key) {
    const corpus = loadCorpus({ seqLen });
    batches = { key, batches: validationBatches(corpus.validation, { batchSize, seqLen, count: EVAL_BATCHES }) };
  }
  return batches.batches;
}

export async function checkCheckpoint(dir: string): Promise<CheckpointCheck> {
  const failed = (error: string): CheckpointCheck => ({
    ok: false,
    error,
    fragments: [],
    roomTokens: 0,
    nonFinite: 0,
    hashMismatches: 0,
    evalLoss: null,
  });
  let checkpoint: ReturnType<typeof decodeRoomCheckpoint>;
  try {
    checkpoint = decodeRoomCheckpoint(readFileSync(join(dir, CHECKPOINT_NAME)), readFileSync(join(dir, STATE_NAME)));
  } catch (error) {
    return failed((error as Error).message);
  }
  const { params, momentum, state } = checkpoint;
  const { config } = state;
  let nonFinite = 0;
  for (const values of [params, momentum]) for (const v of values) if (!Number.isFinite(v)) nonFinite++;

  const layout = buildLayout(config.model);
  const fragments = buildFragments(layout, config.diloco.fragments, config.diloco.fragmentMode);
  const hasher = await createFragmentHasher(config.diloco.hashAlgorithm);
  let hashMismatches = 0;
  for (const [p, fragment] of fragments.entries()) {
    const hash = hasher.hash(gatherFragment(params, fragment), gatherFragment(momentum, fragment));
    if (hash !== state.fragments[p]?.hash) hashMismatches++;
  }

  const trainer = new CpuTrainer(config.model, config.train, params);
  let evalLoss: number;
  try {
    evalLoss = await trainer.evaluate(evalBatchesFor(config.train.batchSize, config.train.seqLen));
  } finally {
    trainer.destroy();
  }
  const problems = [
    nonFinite > 0 && `${nonFinite} non-finite values in θ_global and m`,
    hashMismatches > 0 && `${hashMismatches} fragments hash to other values than the run state says`,
    !Number.isFinite(evalLoss) && `θ_global's validation loss is ${evalLoss}`,
    state.fragments.length !== fragments.length &&
      `${state.fragments.length} fragments, the run has ${fragments.length}`,
  ].filter((problem): problem is string => typeof problem === 'string');
  return {
    ok: problems.length === 0,
    error: problems.length === 0 ? null : problems.join('; '),
    fragments: state.fragments.map(({ round, hash }) => ({ round, hash })),
    roomTokens: state.roomTokens,
    nonFinite,
    hashMismatches,
    evalLoss: Number.isFinite(evalLoss) ? evalLoss : null,
  };
}

/**
 * A pipeline neighbour pinning memory: pipe messages a stage keeps for later
 * steps or for a newer version of its group. The in-memory attack room trains without a pipeline,
 * so the probe runs one mesh stage alone (pipeline/stage-harness.ts), in a two-stage pipeline of
 * the room's model and batch, and hands it what a hostile member would send.
 */
import {
  DEFAULT_MAX_JSON_BYTES,
  HEADER_BYTES,
  maxMessageBytesFor,
  type PipelineSlot,
  type PipeMessage,
  type RunConfig,
} from '@shoal/protocol';
import { stageHarness } from '@shoal/swarm/stage-harness';
import type { Attack, ProbeOutcome } from './types.ts';

/** As in the issue: 20 activations, 1,000 group versions ahead of the victim's. */
const FLOOD_MESSAGES = 20;
const VERSIONS_AHEAD = 1000;
/** The message size; less where the run's largest message is smaller. */
const FLOOD_PAYLOAD_BYTES = 16 * 1024 * 1024;

export const PIPELINE_ATTACKS: Attack[] = [
  {
    name: 'pipeline-neighbour-pins-memory',
    family: 'memory',
    summary: `${FLOOD_MESSAGES} activations of up to 16 MiB, ${VERSIONS_AHEAD} group versions ahead, to a pipeline stage from outside its group; then right-sized ones from a stranger and a flood from its own neighbour`,
    probe: probePipelineFlood,
  },
];

/** The room's run as a pipeline: two stages, two micro-batches (one where the batch is odd). */
export function pipelinedConfig(config: RunConfig): RunConfig {
  if (config.pipeline) return config;
  const micros = config.train.batchSize % 2 === 0 ? 2 : 1;
  return { ...config, pipeline: { stages: 2, micros, schedule: '1f1b', activations: 'f32' } };
}

/**
 * The victim is stage 1 of group 0 (its neighbour holds stage 0); the attacker holds stage 0 of
 * group 1. Four waves, each measured: (1) the flood: the largest message the run's wire
 * carries, as activations of group 0 a thousand versions ahead; (2) a roster change, after which
 * the victim used to queue the flood again; (3) right-sized activations from the attacker for
 * the version just ahead (the roster saying the group changed could be on its way); (4) the
 * victim's own neighbour sending right-sized activations for many steps ahead, in this version
 * and the next. Bytes held is the most the victim kept at once.
 */
function probePipelineFlood(roomConfig: RunConfig): ProbeOutcome {
  const config = pipelinedConfig(roomConfig);
  const { model, train, pipeline } = config as Required<RunConfig>;
  const h = stageHarness(config, 'victim');
  const slot = (group: number, stage: number, version: number): PipelineSlot => ({ group, stage, version });
  const places = { neighbour: slot(0, 0, 3), victim: slot(0, 1, 3), attacker: slot(1, 0, 4) };
  h.roster(places);
  let bytesHeld = 0;
  const measure = () => {
    bytesHeld = Math.max(bytesHeld, h.stage.heldBytes);
  };
  const rows = (train.batchSize / pipeline.micros) * train.seqLen;
  const values = rows * model.nEmbd;
  const act = (version: number, step: number, micro: number): Omit<PipeMessage, 'kind'> => ({
    what: 'act',
    group: 0,
    version,
    step,
    micro,
    dtype: 'f32',
    values,
    targets: rows,
    payload: new Uint8Array(4 * values + 4 * rows), // zeros: finite values, token 0
  });

  const largest = maxMessageBytesFor(config) - HEADER_BYTES - DEFAULT_MAX_JSON_BYTES;
  const floodValues = Math.floor(Math.min(FLOOD_PAYLOAD_BYTES, largest) / 4);
  const flood = new Uint8Array(4 * floodValues);
  for (let i = 0; i < FLOOD_MESSAGES; i++) {
    h.pipe('attacker', {
      ...act(4 + VERSIONS_AHEAD, 1 + i, 0),
      values: floodValues,
      targets: 0,
      payload: flood,
    });
    measure();
  }
  h.roster({ ...places, attacker: slot(1, 0, 5) });
  measure();
  for (let i = 0; i < FLOOD_MESSAGES; i++) {
    h.pipe('attacker', act(6, 1 + i, i % pipeline.micros));
    measure();
  }
  for (const version of [3, 6]) {
    for (let i = 0; i < FLOOD_MESSAGES; i++) {
      h.pipe('neighbour', act(version, 1 + Math.floor(i / pipeline.micros), i % pipeline.micros));
      measure();
    }
  }
  return {
    bytesHeld,
    refusals: h.stage.counters.refused,
    scope: 'one mesh stage (stage 1 of a 2-stage pipeline of the room run), beside no training',
  };
}

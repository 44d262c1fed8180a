/**
 * A worker's engine in a pipeline-parallel room, and how its replica follows it: the worker
 * builds a MeshStageTrainer (pipeline/mesh-stage.ts) instead of a whole-model engine, and its
 * replica keeps the θ_global and m of that stage's fragments only.
 */
import { buildLayout, CpuStageTrainer, initParameters, type Trainer } from '@shoal/model';
import type { RosterMessage, RunConfig } from '@shoal/protocol';
import { fragmentStages } from './pipeline/groups.ts';
import { MeshStageTrainer } from './pipeline/mesh-stage.ts';
import type { ReplicaNode } from './replica-node.ts';
import type { WorkerOptions } from './worker-options.ts';

/**
 * The stage of its group the coordinator places the worker in, starting from `params`; `roster`
 * is the coordinator's latest, `replica` the worker's replica once it has one.
 */
export function meshStageFor(
  options: Pick<WorkerOptions, 'member' | 'coordinator' | 'createStage'>,
  config: RunConfig,
  params: Float32Array,
  roster: RosterMessage | null,
  replica: () => ReplicaNode | null,
): Trainer {
  const { createStage } = options;
  return new MeshStageTrainer(
    {
      member: options.member,
      config,
      coordinator: options.coordinator,
      roster,
      onStage: (stage) => followStage(replica(), config, stage),
      globalParams: () => {
        const layout = buildLayout(config.model);
        const out = new Float32Array(layout.size);
        const node = replica();
        return node ? node.state.params(out) : initParameters(layout, config.train.seed);
      },
      createStage: (spec, local, o) =>
        createStage
          ? createStage(config, spec, local, o)
          : Promise.resolve(new CpuStageTrainer(config.train, spec, local, config.model, o)),
    },
    params,
  );
}

/**
 * A pipeline stage's replica follows its stage's fragments only: the others' θ_global and m are
 * released (8 bytes a parameter), and a stage it moves to has its fragments fetched again.
 */
export function followStage(replica: ReplicaNode | null, config: RunConfig, stage: number): void {
  if (!replica || !config.pipeline) return;
  const { model, diloco, pipeline } = config;
  const stages = fragmentStages(model, diloco.fragments, diloco.fragmentMode, pipeline.stages);
  const own = new Set(stages.flatMap((s, p) => (s === stage ? [p] : [])));
  for (const p of replica.state.follow(own)) replica.resync(p);
}

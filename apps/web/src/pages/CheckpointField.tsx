/**
 * The room form's optional starting checkpoint: a safetensors file whose weights (and model) the
 * room starts from instead of a fresh initialisation of the chosen model.
 */
import { decodeWeights, type GptConfig } from '@shoal/model';

/** A checkpoint the host chose: the file's name, its parameters and its model. */
export interface StartingCheckpoint {
  name: string;
  params: Float32Array;
  model: GptConfig;
}

/** The file field and what it holds; a file that does not decode is a problem for the form to show. */
export function CheckpointField({
  checkpoint,
  onCheckpoint,
  onProblem,
}: {
  checkpoint: StartingCheckpoint | null;
  onCheckpoint: (checkpoint: StartingCheckpoint | null) => void;
  onProblem: (problem: string | null) => void;
}) {
  return (
    <div className="field span-2">
      <label htmlFor="run-checkpoint">Start from a checkpoint (optional)</label>
      <input
        id="run-checkpoint"
        type="file"
        accept=".safetensors"
        aria-describedby="run-checkpoint-help"
        onChange={async (e) => {
          const file = e.target.files?.[0];
          if (!file) return onCheckpoint(null);
          try {
            const { config, params } = decodeWeights(new Uint8Array(await file.arrayBuffer()));
            onCheckpoint({ name: file.name, params, model: config });
            onProblem(null);
          } catch (error) {
            onCheckpoint(null);
            onProblem(`${file.name}: ${(error as Error).message}`);
          }
        }}
      />
      <small id="run-checkpoint-help" className="muted">
        {checkpoint
          ? `${checkpoint.name}: ${checkpoint.model.nLayer} layers × ${checkpoint.model.nEmbd}, replaces the model choice`
          : 'The model starts from these weights (safetensors, nanoGPT names) instead of a fresh initialisation.'}
      </small>
    </div>
  );
}

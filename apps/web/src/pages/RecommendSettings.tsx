/**
 * The host form's Recommend: the planner's settings for the chosen preset, the expected
 * volunteers and their link and GPU, and the fieldset that asks for them and shows the result.
 */
import { formatCount, type PlanOptions, plan } from '@shoal/room/plan';
import type { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { RUN_OPTIONS, type RunOptions } from '@shoal/room/run-options';

/** The Recommend fields as typed: expected volunteers and each one's link and GPU. */
export type RecommendFields = Record<keyof typeof ROOM_MODEL_DEFAULTS, string>;

const RECOMMEND_FIELDS: {
  name: keyof RecommendFields;
  label: string;
  help: string;
  inputMode: 'numeric' | 'decimal';
}[] = [
  { name: 'workers', label: 'Expected volunteers', help: 'how many will train at once', inputMode: 'numeric' },
  { name: 'linkMbps', label: 'Their uplink, Mbit/s', help: 'a home uplink is 5–50', inputMode: 'decimal' },
  { name: 'latencyMs', label: 'Latency, ms', help: 'one way, between volunteers', inputMode: 'decimal' },
  {
    name: 'gpuTflops',
    label: 'Their GPU, TFLOP/s',
    help: 'sustained fp32 training speed (a laptop 2–5, a desktop card 10–30)',
    inputMode: 'decimal',
  },
];

/** The options Recommend fills in: the planner's (the preset stays as chosen) and Schedule steps. */
export type RecommendedOptions = Omit<PlanOptions, 'preset'> & Pick<RunOptions, 'steps'>;
export type Recommendation =
  | { options: RecommendedOptions; summary: string; notes: string[] }
  | { error: string; field?: keyof RecommendFields };

/**
 * The token budget the form trains, or null without a whole number of volunteers: each of them
 * runs the schedule's `steps` inner steps of `batch × seq` tokens.
 */
export function formTokenBudget(form: Pick<RunOptions, 'steps' | 'batch' | 'seq'>, workers: string): number | null {
  const M = expectedVolunteers(workers);
  return M === null ? null : form.steps * form.batch * form.seq * M;
}

/** The expected volunteers as typed, when a whole number ≥ 1; null otherwise. */
export function expectedVolunteers(workers: string): number | null {
  const M = Number(workers);
  return workers.trim() !== '' && Number.isInteger(M) && M >= 1 ? M : null;
}

/**
 * The planner's recommendation (@shoal/room/plan, docs/plan.md) for `preset`, the typed fields
 * and the form's token budget (formTokenBudget): the run options to fill in, with Schedule steps
 * set so the budget stays at the recommended batch and sequence, a summary and the planner's
 * notes; or why not, and which field is wrong.
 */
export function recommendation(
  preset: string,
  fields: RecommendFields,
  form: Pick<RunOptions, 'steps' | 'batch' | 'seq'>,
): Recommendation {
  const number = (text: string) => (text.trim() === '' ? Number.NaN : Number(text));
  try {
    const result = plan({
      preset,
      workers: number(fields.workers),
      tokens: formTokenBudget(form, fields.workers) ?? undefined,
      linkMbps: number(fields.linkMbps),
      latencyMs: number(fields.latencyMs),
      gpuTflops: number(fields.gpuTflops),
    });
    const { preset: _, ...planned } = result.options;
    const { utilization, roundMs, overlapMs, steps } = result.timing;
    const loss =
      result.fit.expectedLoss === null
        ? 'no loss prediction (extrapolated)'
        : `paper's loss ${result.fit.expectedLoss.toFixed(2)}`;
    const summary =
      `${formatCount(result.tokens)} tokens: ${steps} steps of ${planned.batch} × ${planned.seq} per volunteer; ` +
      `${(100 * utilization).toFixed(1)}% compute utilisation predicted${result.meetsTarget ? '' : ' (below 95%)'}; ` +
      `a round ${(roundMs / 1000).toFixed(1)} s against τ steps of ${(overlapMs / 1000).toFixed(1)} s; ${loss}.`;
    return { options: { ...planned, steps }, summary, notes: result.notes };
  } catch (error) {
    const message = (error as Error).message;
    const field = RECOMMEND_FIELDS.find((f) => message.startsWith(`${f.name}:`));
    return field
      ? { error: `${field.label}:${message.slice(field.name.length + 1)}`, field: field.name }
      : { error: message };
  }
}

/** A recommendation and what it was made from: it is shown only while the form still has those. */
export interface MadeRecommendation {
  preset: string;
  fields: RecommendFields;
  result: Recommendation;
}

/** The Recommend fieldset: the fields, what budget it plans for, the button and the result. */
export function RecommendSettings(props: {
  preset: string;
  fields: RecommendFields;
  onField: (name: keyof RecommendFields, text: string) => void;
  budget: number | null;
  made: MadeRecommendation | null;
  checkpoint: boolean;
  onRecommend: () => void;
}) {
  const { fields, made } = props;
  const current =
    made?.preset === props.preset && RECOMMEND_FIELDS.every((f) => made.fields[f.name] === fields[f.name])
      ? made.result
      : null;
  const wrong = current && 'error' in current ? current.field : undefined;
  return (
    <fieldset className="span-2 field recommend">
      <legend>Recommend settings for this model</legend>
      {RECOMMEND_FIELDS.map((f) => (
        <div key={f.name}>
          <label className="inline" htmlFor={`plan-${f.name}`}>
            <span>{f.label}</span>
            <input
              id={`plan-${f.name}`}
              name={`plan-${f.name}`}
              inputMode={f.inputMode}
              size={6}
              value={fields[f.name]}
              aria-invalid={wrong === f.name}
              aria-describedby={`plan-${f.name}-help${wrong === f.name ? ' recommend-error' : ''}`}
              onChange={(e) => props.onField(f.name, e.target.value)}
            />
          </label>
          <small id={`plan-${f.name}-help`} className="muted">
            {f.help}
          </small>
        </div>
      ))}
      <p id="recommend-budget" className="small muted">
        It plans for the form's token budget, {RUN_OPTIONS.steps.label} × {RUN_OPTIONS.batch.label} ×{' '}
        {RUN_OPTIONS.seq.label} × expected volunteers
        {props.budget === null ? '' : ` (now ${formatCount(props.budget)} tokens)`}, and sets {RUN_OPTIONS.steps.label}{' '}
        so that the budget stays at the batch it recommends.
      </p>
      <button
        type="button"
        onClick={props.onRecommend}
        disabled={props.checkpoint}
        aria-describedby="recommend-budget recommend-result"
      >
        Recommend
      </button>
      <output id="recommend-result" aria-live="polite" className="small">
        {props.checkpoint ? (
          <span className="muted">The planner knows the presets; a checkpoint's model is not one.</span>
        ) : current === null ? (
          <span className="muted">
            Fills the inner steps per round (H), fragments (P), merge delay (τ), codec, both learning rates, batch,
            sequence and schedule steps from the DiLoCo scaling laws and the link (docs/plan.md).
          </span>
        ) : 'error' in current ? (
          <span className="field-error" id="recommend-error">
            {current.error}
          </span>
        ) : (
          <>
            <span>{current.summary}</span>
            <ul className="plain muted">
              {current.notes.map((note) => (
                <li key={note}>{note}</li>
              ))}
            </ul>
          </>
        )}
      </output>
    </fieldset>
  );
}

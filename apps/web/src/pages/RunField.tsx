/**
 * One run option of the room form (@shoal/room/run-options): its label, its control, its help and
 * its error.
 */
import { RUN_OPTIONS, type RunOptionName } from '@shoal/room/run-options';
import { presetChoice } from '../ui/RunConfigPanel.tsx';

/**
 * One run option: its label, the control (a select, or a text field with the phone's numeric
 * keypad), its help always, and an error under the help; both describe the control.
 */
export function RunField(props: {
  name: RunOptionName;
  value: string;
  error: string | undefined;
  disabled?: boolean;
  onChange: (text: string) => void;
}) {
  const { name, value, error } = props;
  const spec = RUN_OPTIONS[name];
  const id = `run-${name}`;
  const described = error ? `${id}-help ${id}-error` : `${id}-help`;
  return (
    // the model's choices name its size ("nano — 121k parameters, 2 layers × 64 wide…"): a whole row
    <div className={name === 'preset' ? 'field span-2' : 'field'} data-testid={`field-${name}`}>
      <label htmlFor={id}>{spec.label}</label>
      {spec.kind === 'choice' ? (
        <select
          id={id}
          name={name}
          value={value}
          aria-invalid={Boolean(error)}
          aria-describedby={described}
          onChange={(e) => props.onChange(e.target.value)}
          disabled={props.disabled}
        >
          {spec.choices.map((choice) => (
            <option key={choice} value={choice}>
              {name === 'preset' ? presetChoice(choice) : choice}
            </option>
          ))}
        </select>
      ) : (
        <input
          id={id}
          name={name}
          type="text"
          inputMode={spec.kind === 'integer' ? 'numeric' : 'decimal'}
          // whole numbers: iOS shows its digit pad for this pattern; decimals may be written 3e-4
          pattern={spec.kind === 'integer' ? '[0-9]*' : undefined}
          autoComplete="off"
          value={value}
          aria-invalid={Boolean(error)}
          aria-describedby={described}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
      <small id={`${id}-help`} className="muted">
        {spec.help}
      </small>
      {error && (
        <small id={`${id}-error`} className="field-error">
          {error}
        </small>
      )}
    </div>
  );
}

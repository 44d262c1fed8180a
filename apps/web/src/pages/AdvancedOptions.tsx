/**
 * The room form's Advanced: every run option outside the basic section, by section, under a
 * summary that counts those to correct; it opens by itself for what the person must see there.
 */
import {
  RUN_OPTION_DEFAULTS,
  RUN_OPTION_NAMES,
  RUN_OPTION_SECTIONS,
  RUN_OPTIONS,
  type RunOptionErrors,
  type RunOptionName,
  type RunOptionSection,
  type RunOptions,
} from '@shoal/room/run-options';
import { type ReactNode, useEffect, useState } from 'react';

/** The options under Advanced, by section, in the table's order. */
const ADVANCED = (Object.keys(RUN_OPTION_SECTIONS) as RunOptionSection[])
  .filter((section) => section !== 'basic')
  .map((section) => ({
    section,
    names: RUN_OPTION_NAMES.filter((name) => RUN_OPTIONS[name].section === section),
  }));

export const isAdvanced = (name: RunOptionName) => RUN_OPTIONS[name].section !== 'basic';

/**
 * Whether Advanced is open, and the options there with an error. It opens by itself for a value
 * the link set there, or an error there.
 */
export function useAdvancedOpen(initial: RunOptions, queryErrors: RunOptionErrors, errors: RunOptionErrors) {
  const [open, setOpen] = useState(() =>
    RUN_OPTION_NAMES.some(
      (name) => isAdvanced(name) && (queryErrors[name] || initial[name] !== RUN_OPTION_DEFAULTS[name]),
    ),
  );
  const wrong = RUN_OPTION_NAMES.filter((name) => isAdvanced(name) && errors[name]);
  const wrongKey = wrong.join();
  useEffect(() => {
    if (wrongKey) setOpen(true);
  }, [wrongKey]);
  return { open, setOpen, wrong };
}

/** Advanced, its options drawn by `field`; `children` follow them (the checkpoint, Recommend). */
export function AdvancedOptions(props: {
  open: boolean;
  onToggle: (open: boolean) => void;
  wrong: RunOptionName[];
  field: (name: RunOptionName) => ReactNode;
  children: ReactNode;
}) {
  const { wrong } = props;
  return (
    <details
      className="advanced"
      data-testid="advanced"
      open={props.open}
      onToggle={(e) => props.onToggle(e.currentTarget.open)}
    >
      <summary>
        Advanced: rounds, learning rates, the wire, a pipeline, a starting checkpoint
        {wrong.length > 0 && (
          <span className="field-error">
            {' '}
            ({wrong.length} to correct: {wrong.map((name) => RUN_OPTIONS[name].label).join(', ')})
          </span>
        )}
      </summary>
      <p className="small muted">
        The defaults suit a first room. Each setting says what it does; docs/cli.md has the same options as{' '}
        <code>shoal host</code> flags.
      </p>
      {ADVANCED.map(({ section, names }) => (
        <fieldset key={section} className="form-grid options">
          <legend>{RUN_OPTION_SECTIONS[section]}</legend>
          {names.map(props.field)}
        </fieldset>
      ))}
      <div className="form-grid options">{props.children}</div>
    </details>
  );
}

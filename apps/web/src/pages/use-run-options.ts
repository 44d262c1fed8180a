/**
 * The run options as the room form holds them: prefilled from the URL query, each field's text as
 * typed, the values that parse, each field's error, H from this browser's speed until the link or
 * the person sets it (measured-h.ts), and the page's URL kept to the values while none blocks.
 */
import type { GptConfig } from '@shoal/model';
import {
  checkRunOptions,
  parseRunOption,
  parseRunQuery,
  RUN_OPTION_NAMES,
  RUN_OPTIONS,
  type RunOptionErrors,
  type RunOptionName,
  type RunOptions,
  runQueryOf,
} from '@shoal/room/run-options';
import { useEffect, useMemo, useState } from 'react';
import { useMeasuredInnerSteps } from './measured-h.ts';

/**
 * Each field's error as the form shows it: the text's own (not a number, out of range) first,
 * then the rules between fields on the values as they stand (checkRunOptions), so an error
 * appears beside the field to change while the person types.
 */
export function formErrors(values: RunOptions, typed: RunOptionErrors, model?: GptConfig): RunOptionErrors {
  const rules = checkRunOptions(values, model);
  const errors: RunOptionErrors = {};
  for (const name of RUN_OPTION_NAMES) {
    const error = typed[name] ?? rules[name];
    if (error !== undefined) errors[name] = error;
  }
  return errors;
}

/**
 * The form's run options, checked against `checkpointModel` where the room starts from a
 * checkpoint (H is then not measured: its model is not the preset's).
 */
export function useRunOptions(checkpointModel: GptConfig | undefined) {
  const [{ values: initial, errors: queryErrors }] = useState(() => parseRunQuery(location.search));
  const [values, setValues] = useState<RunOptions>(initial);
  // a field whose query value was refused shows that value beside its error, to be corrected
  const [raw, setRaw] = useState<Record<string, string>>(() => {
    const query = new URLSearchParams(location.search);
    return Object.fromEntries(
      RUN_OPTION_NAMES.map((name) => [name, (queryErrors[name] && query.get(name)) || String(initial[name])]),
    );
  });
  const [typedErrors, setTypedErrors] = useState<RunOptionErrors>(queryErrors);
  const errors = useMemo(
    () => formErrors(values, typedErrors, checkpointModel),
    [values, typedErrors, checkpointModel],
  );

  // H from this browser's speed until the link or the person sets it (measured-h.ts)
  const [autoH, setAutoH] = useState(() => !new URLSearchParams(location.search).has('innerSteps'));
  // measured whatever sets H: the schedule's duration needs the speed too
  const measured = useMeasuredInnerSteps(values, checkpointModel === undefined);
  const measuredH = autoH ? measured : null;
  useEffect(() => {
    if (!measuredH) return;
    const text = String(measuredH.innerSteps);
    setRaw((r) => ({ ...r, innerSteps: text }));
    setTypedErrors((e) => ({ ...e, innerSteps: undefined }));
    setValues((v) => ({ ...v, innerSteps: measuredH.innerSteps }));
  }, [measuredH]);
  const update = (name: RunOptionName, text: string) => {
    if (name === 'innerSteps') setAutoH(false);
    setRaw((r) => ({ ...r, [name]: text }));
    const { value, error } = parseRunOption(name, text);
    setTypedErrors((e) => ({ ...e, [name]: error }));
    if (error === undefined) setValues((v) => ({ ...v, [name]: value }));
  };

  // a refused choice in the query falls back to the default, which the select shows: not a blocker
  const blocking = RUN_OPTION_NAMES.filter(
    (name) => errors[name] && !(RUN_OPTIONS[name].kind === 'choice' && typedErrors[name]),
  );
  useEffect(() => {
    if (blocking.length === 0) history.replaceState(null, '', `/host${runQueryOf(values)}`);
  }, [values, blocking.length]);

  return { initial, queryErrors, values, raw, errors, blocking, measured, measuredH, update };
}

/**
 * The room form's text to train on: Moby Dick from the server, a text file the host uploads, or a
 * packed dataset by URL; the choice as the form holds it (useDatasetChoice, with what is wrong
 * with it) and the fieldset that asks for it.
 */
import { useMemo, useState } from 'react';
import { checkDatasetSpec } from '../runtime/packed-dataset.ts';
import { checkUploadedText, type UploadedText } from '../session/host-config.ts';
import { fmt } from '../ui/parts.tsx';
import { PackedDatasetField } from './PackedDatasetField.tsx';

// Short labels, so the model, the text and Create fit a phone's first screen; the chosen one's
// hint follows the choices.
const DATASETS = [
  { value: 'moby-dick', label: 'Moby Dick (1.2 MB)', hint: 'Served by this server to every volunteer.' },
  { value: 'upload', label: 'Your own text file (≤ 64 MiB)', hint: null },
  {
    value: 'packed',
    label: 'A packed dataset, by URL',
    hint: 'Any size, packed with shoal data pack; each volunteer fetches only its own shards.',
  },
] as const;
type DatasetKind = (typeof DATASETS)[number]['value'];

/** The text to train on as chosen; `error` says what stops a room from being created with it. */
export function useDatasetChoice(seq: number) {
  const [kind, setKind] = useState<DatasetKind>('moby-dick');
  const [url, setUrl] = useState('');
  // the last attempt to open the dataset's manifest failed: why (cleared when the URL changes)
  const [problem, setProblem] = useState<string | undefined>();
  const [text, setText] = useState<UploadedText | null>(null);
  // checked again when the sequence length changes (both splits must hold one window), not on
  // every keystroke: the UTF-8 check reads the whole file
  const uploadError = useMemo(() => (text ? checkUploadedText(text, seq) : undefined), [text, seq]);
  const error =
    kind === 'packed'
      ? (checkDatasetSpec(url) ?? problem)
      : kind !== 'upload'
        ? undefined
        : text
          ? uploadError
          : 'Choose a text file to upload.';
  return { kind, setKind, url, setUrl, problem, setProblem, text, setText, error };
}

export type DatasetChoice = ReturnType<typeof useDatasetChoice>;

/** The choice of the text to train on, the chosen one's hint, and the URL or the file it needs. */
export function DatasetFieldset({ dataset }: { dataset: DatasetChoice }) {
  const { kind, text, error } = dataset;
  return (
    <fieldset className="span-2 field dataset" data-testid="dataset-choice">
      <legend>Text to train on</legend>
      {DATASETS.map(({ value, label }) => (
        <label className="inline" key={value}>
          <input
            type="radio"
            name="dataset"
            value={value}
            checked={kind === value}
            onChange={() => dataset.setKind(value)}
          />
          {label}
        </label>
      ))}
      {DATASETS.map(({ value, hint }) =>
        value === kind && hint ? (
          <small className="muted" key={value}>
            {hint}
          </small>
        ) : null,
      )}
      {kind === 'packed' && (
        <PackedDatasetField
          url={dataset.url}
          error={error}
          onChange={(url) => {
            dataset.setUrl(url);
            dataset.setProblem(undefined);
          }}
        />
      )}
      {kind === 'upload' && (
        <input
          type="file"
          accept=".txt,.md,.csv,.json,.xml,.html,text/*"
          data-testid="dataset-file"
          aria-label="The text file"
          aria-invalid={text !== null && error !== undefined}
          onChange={async (e) => {
            const file = e.target.files?.[0];
            dataset.setText(file ? { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) } : null);
          }}
        />
      )}
      {kind === 'upload' &&
        (text && error ? (
          <small className="field-error">{error}</small>
        ) : (
          <small className="muted">
            {text
              ? `${text.name}: ${fmt.bytes(text.bytes.length)}; the last 10% is held out for validation. It stays in this browser and is sent only to the room’s volunteers.`
              : 'UTF-8; volunteers receive it from this page over the mesh. The model reads bytes: any language, code or prose. The last 10% is held out for validation.'}
          </small>
        ))}
    </fieldset>
  );
}

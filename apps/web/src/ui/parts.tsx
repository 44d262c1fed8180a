/**
 * Small pieces every page uses: the header, stat tiles, a copyable link, error and notice
 * boxes. Numbers always carry units (charts/format.ts).
 */
import { type ReactNode, useEffect, useId, useRef, useState } from 'react';
import { formatBitsPerByte, formatBytes, formatLoss, formatQuantity, formatSi } from '../charts/format.ts';
import type { DatasetInfo } from '../runtime/messages.ts';
import { PackedDatasetLine } from './DatasetParts.tsx';

export const fmt = {
  tokens: (n: number | null | undefined) => (n == null ? '—' : `${formatSi(n)} tokens`),
  /** Losses are kept in nats and shown in bits per byte, nats beside: "1.420 bits/byte (0.984 nats)". */
  loss: (n: number | null | undefined) => (n == null ? '—' : formatLoss(n)),
  /** Bits per byte alone, where a column header names the unit: "1.420". */
  lossBits: (n: number | null | undefined) => (n == null ? '—' : formatBitsPerByte(n)),
  rate: (n: number | null | undefined) => (n == null ? '—' : formatQuantity(n, 'tok/s')),
  bytes: (n: number | null | undefined) => (n == null ? '—' : formatBytes(n)),
  count: (n: number | null | undefined) => (n == null ? '—' : n.toLocaleString('en-US')),
  percent: (n: number | null | undefined) => (n == null ? '—' : `${(n * 100).toFixed(n < 0.1 ? 1 : 0)}%`),
  ago: (ms: number | null | undefined) => (ms == null ? '—' : ms < 1500 ? 'now' : `${Math.round(ms / 1000)} s ago`),
};

export function Header({ children }: { children?: ReactNode }) {
  return (
    <header className="topbar">
      <a className="brand" href="/">
        <img src="/favicon.svg" alt="" width={24} height={24} />
        Shoal
      </a>
      <nav className="topnav">{children}</nav>
      <ThemeToggle />
    </header>
  );
}

/** Light, dark or the system's choice; stored in localStorage. */
function ThemeToggle() {
  const [theme, setTheme] = useState(() => localStorage.getItem('shoal-theme') ?? 'system');
  const next = theme === 'system' ? 'dark' : theme === 'dark' ? 'light' : 'system';
  return (
    <button
      type="button"
      className="ghost small"
      aria-label={`Theme: ${theme}. Switch to ${next}.`}
      onClick={() => {
        applyTheme(next);
        setTheme(next);
      }}
    >
      {theme === 'dark' ? '☾ dark' : theme === 'light' ? '☀ light' : '◐ auto'}
    </button>
  );
}

export function applyTheme(theme = localStorage.getItem('shoal-theme') ?? 'system') {
  localStorage.setItem('shoal-theme', theme);
  if (theme === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

export interface Stat {
  label: string;
  value: string;
  hint?: string;
  testId?: string;
}

export function StatTiles({ stats }: { stats: Stat[] }) {
  return (
    <dl className="tiles">
      {stats.map((stat) => (
        <div className="tile" key={stat.label} title={stat.hint}>
          <dt>{stat.label}</dt>
          <dd data-testid={stat.testId}>{stat.value}</dd>
        </div>
      ))}
    </dl>
  );
}

/**
 * A link to hand on: the field is named by `label` (a screen reader reads "Join link"), the
 * button by what it copies ("Copy the join link").
 */
export function CopyField({ label, value, testId }: { label: string; value: string; testId?: string }) {
  const [copied, setCopied] = useState(false);
  const id = useId();
  return (
    <div className="copy-field">
      <label className="copy-label" htmlFor={id}>
        {label}
      </label>
      <input id={id} readOnly value={value} data-testid={testId} onFocus={(event) => event.currentTarget.select()} />
      <button
        type="button"
        aria-label={`Copy the ${label.replace(/ \(.*\)$/, '').toLowerCase()}`}
        onClick={async () => {
          try {
            await navigator.clipboard.writeText(value);
            setCopied(true);
            setTimeout(() => setCopied(false), 1500);
          } catch {
            // no clipboard permission (an http page, a test browser): the field is selectable
          }
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
      <span className="visually-hidden" aria-live="polite">
        {copied ? `${label} copied` : ''}
      </span>
    </div>
  );
}

/**
 * A question before an action that cannot be taken back lightly: a modal <dialog> with the
 * consequences in `children`, Cancel (focused first, and Escape) and the action's own button.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirm: string;
  danger?: boolean;
  testId?: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      className="confirm card"
      aria-labelledby={titleId}
      data-testid={props.testId}
      onClose={props.onCancel}
    >
      <h2 id={titleId}>{props.title}</h2>
      {props.children}
      <div className="actions">
        {/* biome-ignore lint/a11y/noAutofocus: a dialog focuses its safe choice first */}
        <button type="button" autoFocus onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" className={props.danger ? 'danger' : 'primary'} onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </div>
    </dialog>
  );
}

export function ErrorBox({ error }: { error: string | null }) {
  if (!error) return null;
  return (
    <div className="card bad" role="alert" data-testid="error">
      {error}
    </div>
  );
}

/** The room's text as a person names it: the server's own by its title, an upload by its file name. */
export function corpusName(corpus: string): string {
  return corpus === 'moby-dick' ? 'Moby Dick' : corpus;
}

/** The room's text: its name and size, where it comes from, and a progress bar while it arrives. */
export function DatasetLine({ dataset, own = false }: { dataset: DatasetInfo | null; own?: boolean }) {
  if (!dataset) return null;
  if (dataset.packed) return <PackedDatasetLine dataset={dataset} own={own} />;
  const arriving = dataset.received < dataset.bytes;
  const from =
    dataset.source === 'server'
      ? 'served by the Shoal server'
      : own
        ? 'received from the host over the mesh'
        : 'sent to volunteers from this page over the mesh';
  return (
    <p className="dataset-line" data-testid="dataset">
      <span className="muted">Text:</span> <strong>{corpusName(dataset.name)}</strong> ({fmt.bytes(dataset.bytes)},{' '}
      {from})
      {arriving && (
        <>
          {' '}
          <progress max={dataset.bytes} value={dataset.received} aria-label="text received" />{' '}
          <span className="muted small">{fmt.percent(dataset.received / dataset.bytes)}</span>
        </>
      )}
    </p>
  );
}

export function download(name: string, bytes: Uint8Array, type = 'application/octet-stream') {
  const url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

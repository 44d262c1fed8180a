/**
 * Sampling text from θ_global: prompt, temperature, top-k and length, a Generate button, the
 * progress (exporting model… / loading onnxruntime… / generating 37/200) and the text as it
 * comes. Light on first load: the exporter and onnxruntime-web live in the sampling worker,
 * which starts on the first Generate.
 */
import type { GptConfig } from '@shoal/model';
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import { SampleClient } from './sample-client.ts';
import {
  DEFAULT_SETTINGS,
  LIMITS,
  progressLabel,
  type SamplePhase,
  type SampleSettings,
  type SampleStats,
  settingsProblem,
} from './settings.ts';
import './sampling.css';

export interface SampleParams {
  /** θ_global in the logical flat layout. Its buffer is transferred to the sampling worker: hand over a copy. */
  params: Float32Array;
  model: GptConfig;
  /**
   * Names this θ_global (e.g. every fragment's last committed round and hash): while it stays
   * the same, Generate reuses the exported model instead of exporting again.
   */
  key?: string;
}

export interface SamplePanelProps {
  /** θ_global and its model config, fetched on each Generate (from the host worker). */
  getParams: () => Promise<SampleParams>;
  /** Generate is disabled, with `disabledReason` shown (e.g. "no model yet"). */
  disabled?: boolean;
  disabledReason?: string;
  /** Starting values of the prompt and settings. */
  initialSettings?: Partial<SampleSettings>;
  /** Seeds the sampling for repeatable text (tests); random when left out. */
  seed?: number;
  /** The card's heading; default "Sample text". */
  title?: string;
  /**
   * onnxruntime-web's WebAssembly threads. Default: 1, or half the cores (at most 4) on a
   * cross-origin isolated page; if a threaded start fails, the run retries on one thread.
   */
  threads?: number;
}

type Status =
  | { kind: 'idle' }
  | { kind: 'running'; progress: SamplePhase | { phase: 'params' } }
  | { kind: 'done'; stats: SampleStats }
  | { kind: 'stopped' }
  | { kind: 'error'; message: string };

/** The numeric fields as typed (a field may be mid-edit, e.g. "0."). */
interface Fields {
  prompt: string;
  temperature: string;
  topK: string;
  maxNewTokens: string;
}

const toFields = (s: SampleSettings): Fields => ({
  prompt: s.prompt,
  temperature: String(s.temperature),
  topK: String(s.topK),
  maxNewTokens: String(s.maxNewTokens),
});

const toSettings = (f: Fields): SampleSettings => ({
  prompt: f.prompt,
  temperature: f.temperature.trim() === '' ? Number.NaN : Number(f.temperature),
  topK: f.topK.trim() === '' ? 0 : Number(f.topK),
  maxNewTokens: f.maxNewTokens.trim() === '' ? Number.NaN : Number(f.maxNewTokens),
});

function statusLine(status: Status): string {
  switch (status.kind) {
    case 'idle':
      return '';
    case 'running':
      return status.progress.phase === 'params' ? 'reading θ_global…' : progressLabel(status.progress);
    case 'stopped':
      return 'stopped';
    case 'error':
      return 'failed';
    case 'done': {
      const { tokens, generateMs, exportMs, loadMs, threads } = status.stats;
      const seconds = generateMs / 1000;
      const rate = seconds > 0 ? tokens / seconds : 0;
      const parts = [`${tokens} tokens in ${seconds.toFixed(1)} s (${rate.toFixed(rate < 10 ? 1 : 0)} tok/s)`];
      if (exportMs > 0 || loadMs > 0) parts.push(`export ${exportMs.toFixed(0)} ms, load ${loadMs.toFixed(0)} ms`);
      else parts.push('model reused');
      parts.push(`${threads} thread${threads === 1 ? '' : 's'}`);
      return parts.join(' · ');
    }
  }
}

export function SamplePanel({
  getParams,
  disabled,
  disabledReason,
  initialSettings,
  seed,
  title,
  threads,
}: SamplePanelProps) {
  const id = useId();
  const [fields, setFields] = useState<Fields>(() => toFields({ ...DEFAULT_SETTINGS, ...initialSettings }));
  const [status, setStatus] = useState<Status>({ kind: 'idle' });
  const [output, setOutput] = useState<{ prompt: string; text: string } | null>(null);
  const client = useRef<SampleClient | null>(null);
  /** Events of an older run (stopped, replaced) are ignored. */
  const run = useRef(0);

  useEffect(
    () => () => {
      run.current++;
      client.current?.dispose();
      client.current = null;
    },
    [],
  );

  const settings = toSettings(fields);
  const problem = settingsProblem(settings);
  const running = status.kind === 'running';
  const set = (key: keyof Fields) => (event: { currentTarget: { value: string } }) => {
    const value = event.currentTarget.value;
    setFields((f) => ({ ...f, [key]: value }));
  };

  async function generate(event?: FormEvent) {
    event?.preventDefault();
    if (running || disabled || problem) return;
    const mine = ++run.current;
    const current = run;
    const live = () => current.current === mine;
    setStatus({ kind: 'running', progress: { phase: 'params' } });
    setOutput({ prompt: settings.prompt, text: '' });
    let fetched: SampleParams;
    try {
      fetched = await getParams();
    } catch (error) {
      if (live()) setStatus({ kind: 'error', message: `Could not get θ_global: ${(error as Error).message ?? error}` });
      return;
    }
    if (!live()) return;
    client.current ??= new SampleClient();
    await client.current.run(
      {
        ...settings,
        params: fetched.params,
        model: fetched.model,
        ...(fetched.key !== undefined ? { paramsKey: fetched.key } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...(threads !== undefined ? { numThreads: threads } : {}),
      },
      (e) => {
        if (!live()) return;
        if (e.type === 'progress') setStatus({ kind: 'running', progress: e });
        else if (e.type === 'text') setOutput((o) => (o ? { ...o, text: o.text + e.text } : o));
        else if (e.type === 'done') setStatus({ kind: 'done', stats: e.stats });
        else setStatus({ kind: 'error', message: e.message });
      },
    );
  }

  function stop() {
    run.current++;
    client.current?.stop();
    setStatus({ kind: 'stopped' });
  }

  const progress =
    status.kind === 'running' && status.progress.phase === 'generate'
      ? { value: status.progress.done, max: status.progress.total }
      : null;

  return (
    <section className="card shoal-sample" data-testid="sample-panel" aria-busy={running}>
      <h2>{title ?? 'Sample text'}</h2>
      <form className="shoal-sample-form" onSubmit={generate}>
        <label className="shoal-sample-prompt" htmlFor={`${id}-prompt`}>
          Prompt
        </label>
        <textarea
          id={`${id}-prompt`}
          rows={3}
          value={fields.prompt}
          onChange={set('prompt')}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void generate();
          }}
          spellCheck={false}
          data-testid="sample-prompt"
        />
        <div className="shoal-sample-settings">
          <label>
            Temperature
            <input
              type="number"
              inputMode="decimal"
              min={LIMITS.temperature.min}
              max={LIMITS.temperature.max}
              step={0.1}
              value={fields.temperature}
              onChange={set('temperature')}
              data-testid="sample-temperature"
            />
          </label>
          <label title="0 samples among all 256 bytes">
            Top-k
            <input
              type="number"
              inputMode="numeric"
              min={LIMITS.topK.min}
              max={LIMITS.topK.max}
              step={1}
              value={fields.topK}
              onChange={set('topK')}
              data-testid="sample-top-k"
            />
          </label>
          <label>
            Max new tokens
            <input
              type="number"
              inputMode="numeric"
              min={LIMITS.maxNewTokens.min}
              max={LIMITS.maxNewTokens.max}
              step={1}
              value={fields.maxNewTokens}
              onChange={set('maxNewTokens')}
              data-testid="sample-max-tokens"
            />
          </label>
        </div>
        <div className="shoal-sample-actions">
          {/* Distinct keys: reusing the Stop button's node as the submit button would submit the form on the Stop click. */}
          {running ? (
            <button key="stop" type="button" onClick={stop} data-testid="sample-stop">
              Stop
            </button>
          ) : (
            <button
              key="generate"
              type="submit"
              className="primary"
              disabled={Boolean(disabled || problem)}
              data-testid="sample-generate"
            >
              Generate
            </button>
          )}
          <span className="muted" role="status" data-testid="sample-status">
            {statusLine(status)}
          </span>
          {progress && <progress value={progress.value} max={progress.max} />}
        </div>
        {disabled && disabledReason && <p className="muted">{disabledReason}</p>}
        {problem && <p className="error">{problem}</p>}
      </form>
      {status.kind === 'error' && (
        <p className="error" role="alert" data-testid="sample-error">
          {status.message}
        </p>
      )}
      {output && (
        <pre className="shoal-sample-output" data-testid="sample-output">
          <span className="shoal-sample-given">{output.prompt}</span>
          {output.text}
        </pre>
      )}
    </section>
  );
}

/**
 * This browser's GPU: the adapter WebGPU offers and a WGSL self-test against the CPU (the
 * landing page shows both, so a would-be volunteer knows before joining), and the engine probe:
 * how fast each engine trains here, measured (runtime/engine-probe.ts).
 */

import { type AdapterReport, formatAdapter, type SelfTestResult } from '@shoal/gpu';
import { type ReactNode, useEffect, useState } from 'react';
import {
  type Engine,
  type EngineProbe,
  engineLabel,
  measureText,
  type ProbeProgress,
  type ProbeRequest,
  probeEngines,
  probeMaxMs,
} from '../runtime/engine-probe.ts';
import type { GpuStatus } from '../store.ts';

const mib = (bytes: number) => `${(bytes / 2 ** 20).toLocaleString(undefined, { maximumFractionDigits: 0 })} MiB`;
const yesNo = (value: boolean) => (value ? 'yes' : 'no');

function AdapterTable({ adapter }: { adapter: AdapterReport }) {
  const rows: [string, string][] = [
    ['Vendor', adapter.vendor || '—'],
    ['Architecture', adapter.architecture || '—'],
    ['Description', adapter.description || adapter.device || '—'],
    ['Fallback adapter', yesNo(adapter.isFallback)],
    ['Max storage binding', mib(adapter.limits.maxStorageBufferBindingSize)],
    ['Max buffer', mib(adapter.limits.maxBufferSize)],
    ['Max workgroup', `${adapter.limits.maxComputeInvocationsPerWorkgroup} invocations`],
    ['shader-f16 / subgroups', `${yesNo(adapter.features.shaderF16)} / ${yesNo(adapter.features.subgroups)}`],
  ];
  return (
    <table className="facts" data-testid="adapter">
      <tbody>
        {rows.map(([name, value]) => (
          <tr key={name}>
            <th scope="row">{name}</th>
            <td>{value}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function GpuCard({ gpu, children }: { gpu: GpuStatus; children?: ReactNode }) {
  if (gpu.kind === 'checking') {
    return (
      <section className="card" aria-busy="true">
        <h2>This browser's GPU</h2>
        <p className="muted">Looking for a WebGPU adapter…</p>
      </section>
    );
  }
  if (gpu.kind === 'unavailable') {
    return (
      <section className="card warn" data-testid="no-webgpu">
        <h2>WebGPU is not available here</h2>
        <p>{gpu.reason}</p>
        <WebGpuHelp />
        {children}
      </section>
    );
  }
  return (
    <section className="card">
      <h2>
        This browser's GPU{' '}
        <span className={`badge ${gpu.adapter.isSoftware ? 'slow' : 'good'}`}>
          {gpu.adapter.isSoftware ? 'software' : 'hardware'}
        </span>
      </h2>
      <p data-testid="adapter-summary">{formatAdapter(gpu.adapter)}</p>
      {gpu.adapter.isSoftware && (
        <p className="muted">
          A software adapter computes correctly but slowly (0.2–2 GFLOP/s); a real GPU trains far faster.
        </p>
      )}
      <AdapterTable adapter={gpu.adapter} />
    </section>
  );
}

export function SelfTestCard({ result }: { result: SelfTestResult | null }) {
  if (!result) {
    return (
      <section className="card" aria-busy="true">
        <h2>WGSL self-test</h2>
        <p className="muted">Running a parallel sum on the GPU and checking it against the CPU…</p>
      </section>
    );
  }
  return (
    <section className="card">
      <h2>
        WGSL self-test{' '}
        <span className={`badge ${result.pass ? 'good' : 'bad'}`} data-testid="self-test-status">
          {result.pass ? 'pass' : 'fail'}
        </span>
      </h2>
      <p className="muted">
        Parallel sum on the GPU against a float64 sum on the CPU, {result.milliseconds.toFixed(0)} ms in all.
      </p>
      {result.error && <p className="error">{result.error}</p>}
      <table className="numbers">
        <thead>
          <tr>
            <th>values</th>
            <th>GPU</th>
            <th>CPU</th>
            <th>|error|</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {result.cases.map((c) => (
            <tr key={c.n}>
              <td>{c.n.toLocaleString()}</td>
              <td>{c.got.toPrecision(8)}</td>
              <td>{c.want.toPrecision(8)}</td>
              <td>{Math.abs(c.got - c.want).toExponential(1)}</td>
              <td>{c.ok ? '✓' : '✗'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** How to get WebGPU, by browser: what a volunteer without it needs to read. */
export function WebGpuHelp() {
  return (
    <>
      <p>Shoal trains on the GPU through WebGPU. To turn it on:</p>
      <ul>
        <li>
          <strong>Chrome or Edge</strong> 113 or newer on Windows, macOS and ChromeOS, 121 or newer on Android: on by
          default. On Linux, open <code>chrome://flags/#enable-unsafe-webgpu</code>, enable it, and start the browser
          with <code>--enable-features=Vulkan</code>.
        </li>
        <li>
          <strong>Firefox</strong> 141 or newer on Windows: on by default. Elsewhere, set{' '}
          <code>dom.webgpu.enabled</code> to true in <code>about:config</code> (Nightly).
        </li>
        <li>
          <strong>Safari</strong> 26 on macOS, iOS and iPadOS: on by default; in older versions enable WebGPU under
          Develop → Feature Flags.
        </li>
        <li>
          The page must come over <strong>https</strong> (or from localhost): browsers hide WebGPU from plain http
          pages. A blocklisted GPU driver also hides it: update the driver.
        </li>
      </ul>
    </>
  );
}

export interface EngineProbeState {
  probe: EngineProbe | null;
  /** The engine being measured now, null when not measuring. */
  progress: ProbeProgress | null;
  /** Why measuring failed as a whole (each engine's own failure is in its measure). */
  error: string | null;
}

/**
 * Measures both engines on `model` once the GPU check has answered (null: not yet, e.g. while the
 * room's model is being asked for); stops measuring when the page no longer wants it.
 */
export function useEngineProbe(gpu: GpuStatus, model: Omit<ProbeRequest, 'engine'> | null): EngineProbeState {
  const [state, setState] = useState<EngineProbeState>({ probe: null, progress: null, error: null });
  const gpuReason = gpu.kind === 'unavailable' ? gpu.reason : null;
  const ready = gpu.kind !== 'checking' && model !== null;
  const { preset, batch, seq } = model ?? { preset: '' };
  useEffect(() => {
    if (!ready) return;
    const abort = new AbortController();
    setState({ probe: null, progress: null, error: null });
    probeEngines(
      { preset, batch, seq },
      {
        gpuReason,
        signal: abort.signal,
        onProgress: (progress) => !abort.signal.aborted && setState((s) => ({ ...s, progress })),
      },
    ).then(
      (probe) => !abort.signal.aborted && setState({ probe, progress: null, error: null }),
      (error: unknown) => !abort.signal.aborted && setState({ probe: null, progress: null, error: String(error) }),
    );
    return () => abort.abort();
  }, [ready, preset, batch, seq, gpuReason]);
  return state;
}

/** Seconds since `startedAt`, ticking. */
function useSecondsSince(startedAt: number | null): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (startedAt === null) return;
    const timer = setInterval(() => setNow(Date.now()), 500);
    return () => clearInterval(timer);
  }, [startedAt]);
  return startedAt === null ? 0 : Math.max(0, Math.floor((now - startedAt) / 1000));
}

/**
 * "Measuring the GPU engine… 9 s of at most 26 s" with a bar while the probe runs, after the
 * CPU's figure once it has one: what it does and how long it can take, so the wait has an end.
 */
export function ProbeProgressLine({ progress }: { progress: ProbeProgress | null }) {
  const seconds = useSecondsSince(progress?.startedAt ?? null);
  if (!progress) return null;
  const gpu = progress.engine === 'webgpu';
  const most = Math.round(probeMaxMs() / 1000);
  return (
    <span role="status" data-testid="probe-progress">
      {progress.cpu && `CPU: ${measureText(progress.cpu)} · `}
      <progress className="probe-bar" max={most} value={Math.min(seconds, most)} aria-hidden="true" />{' '}
      <span className="muted">
        measuring the {gpu ? 'GPU' : 'CPU'} engine on this model ({gpu ? 'compiling its kernels, then ' : ''}timing a
        few steps)… {seconds} s of at most {most} s
      </span>
    </span>
  );
}

/** Each engine's measured speed, in words: "CPU: about 30,000 tokens/s". */
export function engineFigure(probe: EngineProbe, engine: Engine): string {
  return `${engineLabel(engine, probe[engine])}: ${measureText(probe[engine])}`;
}

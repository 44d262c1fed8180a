import { type AdapterReport, formatAdapter, type SelfTestResult } from '@shoal/gpu';
import { useStore } from 'zustand';
import { type GpuStatus, store } from './store.ts';

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

function GpuCard({ gpu }: { gpu: GpuStatus }) {
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

function SelfTestCard({ result }: { result: SelfTestResult | null }) {
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

export function App() {
  const gpu = useStore(store, (s) => s.gpu);
  const selfTest = useStore(store, (s) => s.selfTest);
  return (
    <main>
      <header>
        <h1>
          <img src="/favicon.svg" alt="" width="28" height="28" /> Shoal
        </h1>
        <p className="lede">
          Shoal trains a language model on volunteers' GPUs, right in their browsers. A host opens a room and shares a
          link; everyone who opens it lends their GPU, and the model learns from all of them at once.
        </p>
      </header>
      <GpuCard gpu={gpu} />
      {gpu.kind === 'ready' && <SelfTestCard result={selfTest} />}
      <footer className="muted">Hosting and joining training rooms arrive with the next releases.</footer>
    </main>
  );
}

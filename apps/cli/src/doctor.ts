/**
 * `shoal doctor`: what this machine can do for Shoal. Exit code 1 when no adapter is found or
 * the WGSL self-test fails; WebRTC and Chromium are reported, not required.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  type AcquireOptions,
  type AdapterReport,
  acquireGpu,
  formatAdapter,
  runSelfTest,
  type SelfTestResult,
} from '@shoal/gpu';
import { chromiumPath } from './chromium.mjs';

interface Check<T> {
  ok: boolean;
  detail: T;
  error?: string;
}

export interface DoctorReport {
  node: string;
  adapter: AdapterReport | null;
  adapterError?: string;
  selfTest: 'pass' | 'fail';
  selfTestDetail: SelfTestResult | null;
  webrtc: Check<{ implementation: string; loopbackMs?: number }>;
  chromium: Check<{ path: string | null; version?: string }>;
}

/** Two wrtc peers on loopback exchange one message over a data channel. */
async function checkWebRtc(): Promise<DoctorReport['webrtc']> {
  const implementation = '@roamhq/wrtc';
  try {
    const wrtc = (await import('@roamhq/wrtc')).default as typeof import('@roamhq/wrtc');
    const started = performance.now();
    const a = new wrtc.RTCPeerConnection();
    const b = new wrtc.RTCPeerConnection();
    try {
      a.onicecandidate = (e) => e.candidate && b.addIceCandidate(e.candidate);
      b.onicecandidate = (e) => e.candidate && a.addIceCandidate(e.candidate);
      const received = new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no message within 5 s')), 5000);
        b.ondatachannel = (e) => {
          e.channel.onmessage = (m) => {
            clearTimeout(timer);
            resolve(String(m.data));
          };
        };
      });
      const channel = a.createDataChannel('doctor');
      channel.onopen = () => channel.send('ping');
      await a.setLocalDescription(await a.createOffer());
      await b.setRemoteDescription(a.localDescription as RTCSessionDescriptionInit);
      await b.setLocalDescription(await b.createAnswer());
      await a.setRemoteDescription(b.localDescription as RTCSessionDescriptionInit);
      const message = await received;
      if (message !== 'ping') throw new Error(`received ${JSON.stringify(message)} instead of "ping"`);
      return { ok: true, detail: { implementation, loopbackMs: Math.round(performance.now() - started) } };
    } finally {
      a.close();
      b.close();
    }
  } catch (error) {
    return { ok: false, detail: { implementation }, error: String(error) };
  }
}

async function checkChromium(): Promise<DoctorReport['chromium']> {
  const path = chromiumPath();
  if (!path)
    return {
      ok: false,
      detail: { path },
      error: 'not found: apt-get install chromium, or set CHROMIUM=/path/to/chrome',
    };
  try {
    const { stdout } = await promisify(execFile)(path, ['--version'], { timeout: 15_000 });
    const version = stdout.trim().split('\n').at(-1) ?? '';
    // Ubuntu's chromium-browser is a stub that asks for the snap; it prints no version.
    if (!/(Chromium|Chrome)\s+\d+/.test(version)) {
      return {
        ok: false,
        detail: { path, version },
        error: 'this is not a runnable Chromium (a snap stub?): set CHROMIUM',
      };
    }
    return { ok: true, detail: { path, version } };
  } catch (error) {
    return { ok: false, detail: { path }, error: `${path} --version failed: ${String(error)}` };
  }
}

export async function runDoctor(prefer?: AcquireOptions['prefer']): Promise<DoctorReport> {
  const [webrtc, chromium] = await Promise.all([checkWebRtc(), checkChromium()]);
  const report: DoctorReport = {
    node: process.version,
    adapter: null,
    selfTest: 'fail',
    selfTestDetail: null,
    webrtc,
    chromium,
  };
  try {
    const gpu = await acquireGpu(prefer ? { prefer } : {});
    report.adapter = gpu.report;
    report.selfTestDetail = await runSelfTest(gpu.device);
    report.selfTest = report.selfTestDetail.pass ? 'pass' : 'fail';
    gpu.destroy();
  } catch (error) {
    report.adapterError = error instanceof Error ? error.message : String(error);
  }
  return report;
}

const mark = (ok: boolean) => (ok ? '✓' : '✗');

function printReport(report: DoctorReport): void {
  const lines: string[] = [`Shoal doctor (Node ${report.node})`, ''];
  if (report.adapter) {
    const { limits, features } = report.adapter;
    lines.push(`${mark(true)} WebGPU adapter: ${formatAdapter(report.adapter)} [${report.adapter.source}]`);
    lines.push(
      `    max storage binding ${(limits.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB, ` +
        `max buffer ${(limits.maxBufferSize / 2 ** 20).toFixed(0)} MiB, ` +
        `max workgroup ${limits.maxComputeInvocationsPerWorkgroup} invocations, ` +
        `shader-f16 ${features.shaderF16 ? 'yes' : 'no'}, subgroups ${features.subgroups ? 'yes' : 'no'}`,
    );
    if (report.adapter.isSoftware)
      lines.push('    software adapter: correct but slow (0.2–2 GFLOP/s); use a real GPU to train');
  } else {
    lines.push(`${mark(false)} WebGPU adapter: ${report.adapterError}`);
  }
  const detail = report.selfTestDetail;
  if (detail) {
    const sizes = detail.cases.map((c) => `${c.n}${c.ok ? '' : ' ✗'}`).join(', ');
    lines.push(
      `${mark(detail.pass)} WGSL self-test (parallel sum vs CPU, n = ${sizes}): ${report.selfTest} in ${detail.milliseconds.toFixed(0)} ms` +
        (detail.error ? `\n    ${detail.error}` : ''),
    );
  } else {
    lines.push(`${mark(false)} WGSL self-test: not run (no adapter)`);
  }
  const { webrtc, chromium } = report;
  lines.push(
    webrtc.ok
      ? `${mark(true)} WebRTC in Node: ${webrtc.detail.implementation}, loopback data channel in ${webrtc.detail.loopbackMs} ms`
      : `${mark(false)} WebRTC in Node: ${webrtc.error}`,
  );
  lines.push(
    chromium.ok
      ? `${mark(true)} Chromium: ${chromium.detail.version} at ${chromium.detail.path}`
      : `${mark(false)} Chromium: ${chromium.error}`,
  );
  console.log(lines.join('\n'));
}

export async function doctorCommand(options: { json?: boolean; adapter?: string }): Promise<number> {
  const report = await runDoctor(options.adapter as AcquireOptions['prefer']);
  if (options.json) console.log(JSON.stringify(report));
  else printReport(report);
  return report.adapter && report.selfTest === 'pass' ? 0 : 1;
}

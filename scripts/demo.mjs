#!/usr/bin/env node
// `npm run demo`: a whole room on this machine: the Shoal server, `shoal host` (nano on Moby
// Dick) and two `shoal worker`s, over real WebRTC on loopback, with one live progress line built
// from the host's --json events. Ctrl-C (or --duration) stops everyone cleanly.
//
//   npm run demo -- [--workers 2] [--backend cpu|webgpu] [--port 8090] [--duration SECONDS]
//                   [--inner-steps 10]
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const shoal = join(root, 'apps/cli/bin/shoal.mjs');
const { values: args } = parseArgs({
  options: {
    workers: { type: 'string', default: '2' },
    backend: { type: 'string', default: 'cpu' },
    port: { type: 'string', default: '8090' },
    duration: { type: 'string' },
    'inner-steps': { type: 'string', default: '10' },
  },
});
const server = `http://localhost:${args.port}`;
const children = [];
const tty = process.stdout.isTTY;

function run(name, argv, onLine) {
  // The workers share this machine's cores.
  const threads = String(Math.max(1, Math.floor(availableParallelism() / Number(args.workers))));
  const env = { ...process.env, SHOAL_CPU_THREADS: process.env.SHOAL_CPU_THREADS ?? threads };
  const child = spawn(process.execPath, [shoal, ...argv], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) if (line.trim()) onLine?.(line);
  });
  child.stderr.setEncoding('utf8').on('data', (chunk) => {
    if (/error/i.test(chunk)) process.stderr.write(`[${name}] ${chunk}`);
  });
  child.on('exit', (code) => {
    if (!stopping && code !== 0) {
      console.error(`\n${name} exited with ${code}`);
      stop(1);
    }
  });
  return child;
}

let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  if (tty) process.stdout.write('\n');
  // Workers first (they leave the room), then the host (it checkpoints), then the server.
  for (const group of [children.slice(2), [children[1]], [children[0]]]) {
    await Promise.all(
      group.filter(Boolean).map(
        (child) =>
          new Promise((resolve) => {
            if (child.exitCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGINT');
            setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
  }
  console.log(`demo stopped; rounds committed: ${committed}`);
  process.exit(code);
}
process.on('SIGINT', () => stop());
process.on('SIGTERM', () => stop());

const fmt = (value, digits = 3) => (typeof value === 'number' && Number.isFinite(value) ? value.toFixed(digits) : '—');
let committed = 0;
let last = {};
function show() {
  const line =
    `step ${last.step ?? 0} | ${(last.tokens ?? 0).toLocaleString()} tokens | loss ${fmt(last.trainLoss)} | ` +
    `θ_global val ${fmt(last.evalLoss)} | ${Math.round(last.tokensPerSecond ?? 0).toLocaleString()} tok/s | ` +
    `${committed} rounds | ${((last.bytesSent ?? 0) / 1e6).toFixed(2)} MB up`;
  if (tty) process.stdout.write(`\r${line.padEnd(110)}`);
  else console.log(line);
}

run('server', ['server', '--port', args.port]);
await new Promise((resolve) => setTimeout(resolve, 1500));
run(
  'host',
  [
    'host',
    '--server',
    server,
    '--inner-steps',
    args['inner-steps'],
    '--batch',
    '8',
    '--eval-every-ms',
    '10000',
    '--metrics-every-ms',
    '2000',
    '--json',
  ],
  (line) => {
    const event = JSON.parse(line);
    if (event.event === 'room') {
      console.log(`room ${event.roomId} on ${server}; join link: ${event.joinUrl}`);
      if (event.watchUrl) console.log(`read-only view (share it to watch): ${event.watchUrl}`);
      for (let i = 0; i < Number(args.workers); i++) {
        run(`worker ${i + 1}`, [
          'worker',
          '--server',
          server,
          '--room',
          event.roomId,
          '--token',
          event.joinToken,
          '--backend',
          args.backend,
        ]);
      }
    } else if (event.event === 'round-committed') {
      committed++;
      if (tty) show(); // piped: one line per metrics event is enough
    } else if (event.event === 'metrics') {
      last = event;
      show();
    } else if (event.event === 'peer-joined' || event.event === 'peer-left') {
      if (tty) process.stdout.write('\n');
      console.log(`${event.event}: ${event.peer}`);
    }
  },
);
if (args.duration) setTimeout(() => stop(committed > 0 ? 0 : 1), Number(args.duration) * 1000);

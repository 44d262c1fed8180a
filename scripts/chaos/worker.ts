/**
 * A chaos-run worker, as a process of its own: `shoal worker --backend cpu` (the CLI's own
 * joinRoomAsWorker, engine and signal handling), plus what the run needs to see and do that the
 * CLI does not offer:
 *
 * - every link it sends on is delayed (--delay-ms + up to --jitter-ms per message, order kept);
 * - it prints, one JSON line each, the round-opens the coordinator sends it (`opened`), every
 *   fragment state its replica holds (`adopted`: fragment, round, hash, checked every 100 ms),
 *   non-finite training losses (`nan`), and its metrics when it leaves (`left`);
 * - with --hostile, its messages are rewritten by a rotating hostile behaviour (hostile.ts).
 *
 *   node --import tsx --import ./bench/register-raw.mjs scripts/chaos/worker.ts \
 *     --server URL --room ID --token T [--delay-ms 40] [--jitter-ms 40] [--hostile] [--seed 1] [--rotate-ms 20000]
 *     [--behaviours contribution-100x,forged-commit,…]
 */
import { CpuTrainer } from '@shoal/model';
import type { PeerId } from '@shoal/protocol';
import { loadWrtc } from '../../apps/cli/src/room.ts';
import { joinRoomAsWorker, untilStopped } from '../../apps/cli/src/worker.ts';
import { installHostility } from './hostile.ts';
import { seededRandom } from './random.ts';
import { parseChaosWorkerArgs } from './worker-args.ts';

const args = parseChaosWorkerArgs(process.argv.slice(2));

/** One JSON line, stamped with the wall clock (ms) so that the processes' logs can be read side by side. */
const print = (event: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ ...event, t: Date.now() })}\n`);
const random = seededRandom(args.seed);
const { delayMs, jitterMs } = args;

let nonFiniteLosses = 0;
const room = await joinRoomAsWorker({
  server: args.server,
  room: args.room,
  token: args.token,
  wrtc: await loadWrtc(),
  capabilities: { backend: 'cpu', adapter: 'CPU (chaos run)', tokensPerSecond: 0 },
  createEngine: async (config, params) => {
    const trainer = new CpuTrainer(config.model, config.train, params);
    const step = trainer.step.bind(trainer);
    trainer.step = async (...stepArgs) => {
      const loss = await step(...stepArgs);
      if (!Number.isFinite(loss)) print({ event: 'nan', what: 'train-loss', count: ++nonFiniteLosses });
      return loss;
    };
    return trainer;
  },
});
const { joined, link, worker } = room;
const { member, mesh } = link;
print({ event: 'joined', peer: joined.peerId, host: joined.hostId, hostile: args.hostile });

// Delayed links: each message to a peer leaves delay + jitter after it was sent, never before the
// one sent to that peer before it (links stay ordered, as WebRTC's reliable channels are).
if (delayMs > 0 || jitterMs > 0) {
  const send = mesh.send.bind(mesh);
  const due = new Map<PeerId, number>();
  mesh.send = async (to, bytes) => {
    const now = performance.now();
    const at = Math.max(now + delayMs + random() * jitterMs, due.get(to) ?? 0);
    due.set(to, at);
    await new Promise((resolve) => setTimeout(resolve, at - now));
    return send(to, bytes);
  };
}

const hostility = args.hostile
  ? installHostility({
      member,
      coordinator: joined.hostId,
      random,
      rotateMs: args.rotateMs,
      ...(args.behaviours && { only: args.behaviours }),
      log: print,
    })
  : null;

member.on('round-open', (from, open) => {
  if (from !== joined.hostId) return;
  print({ event: 'opened', fragment: open.fragment, round: open.round, participants: open.participants.length });
});

// The room as the coordinator tells it (a member benched, diverged or unreachable, and why),
// whenever a member's status or reason changes.
let lastRoster = '';
member.on('roster', (from, roster) => {
  if (from !== joined.hostId) return;
  const members = roster.members.map(({ peer, status, reason }) => ({ peer, status, reason }));
  const text = JSON.stringify(members);
  if (text === lastRoster) return;
  lastRoster = text;
  print({ event: 'roster', epoch: roster.epoch, members });
});

// What the replica holds, whenever it changes: a commit adopted, or state fetched from the host.
const held: string[] = [];
const watch = setInterval(() => {
  const fragments = worker.replica?.state.fragments ?? [];
  for (const [fragment, state] of fragments.entries()) {
    const key = `${state.round}:${state.hash}`;
    if (held[fragment] === key) continue;
    held[fragment] = key;
    print({ event: 'adopted', fragment, round: state.round, hash: state.hash });
  }
}, 100);

const stoppedBy = await untilStopped(room);
clearInterval(watch);
hostility?.stop();
await room.leave();
print({
  event: 'left',
  peer: joined.peerId,
  metrics: worker.metrics,
  nonFiniteLosses,
  ...(hostility && { tampered: hostility.tampered }),
  stoppedBy: stoppedBy instanceof Error ? stoppedBy.message : stoppedBy,
});
process.exit(stoppedBy instanceof Error ? 1 : 0);

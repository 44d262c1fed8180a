/**
 * `shoal host` and two `shoal worker --backend cpu` as child processes, over real WebRTC on
 * loopback through a signaling server in this process: the host's --json lines are the contract
 * under test (room, peer-joined, round-committed, metrics, peer-left), and a watcher with the room's
 * watch key gets the host's published view; then SIGINT ends everyone cleanly. The room trains on
 * a text file (`--data`): one worker is given it, the other receives it from the host over the mesh.
 */
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bitsPerByte, corpusFingerprint, loadMobyDick } from '@shoal/data';
import { startServer } from '@shoal/server';
import type { ServerMessageOf } from '@shoal/signaling';
import { SignalClient, signalUrl, type WebSocketConstructor } from '@shoal/signaling';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { CHECKPOINT_NAME, STATE_NAME } from './host-resume.ts';
import { loadWrtc } from './room.ts';
import { eventsOf, type Proc, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();

function must<T>(value: T | null | undefined): T {
  if (value === null || value === undefined) throw new Error('expected a value');
  return value;
}

afterAll(killAll);

describe('shoal host + shoal worker over WebRTC', () => {
  it('trains nano in a room of two CPU workers, commits rounds, evaluates θ_global, and exits cleanly on SIGINT', {
    timeout: 240_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const server = await startServer({ port: 0, logger: null });
    const checkpoints = mkdtempSync(join(tmpdir(), 'shoal-host-'));
    try {
      // the room's text: a file only the host and worker 0 have (the first 400 kB of Moby Dick)
      const text = loadMobyDick().subarray(0, 400_000);
      const data = join(checkpoints, 'room-text.txt');
      writeFileSync(data, text);
      const startedAt = performance.now();
      const host = start('host', [
        'host',
        '--server',
        server.url,
        '--data',
        data,
        '--preset',
        'nano',
        '--inner-steps',
        '5',
        '--batch',
        '4',
        '--eval-every-ms',
        '2000',
        '--metrics-every-ms',
        '1000',
        '--publish-every-ms',
        '500',
        '--checkpoint-dir',
        checkpoints,
        '--json',
      ]);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      expect(room.event).toBe('room');
      expect(room.joinUrl).toBe(`${server.url}/join/${room.roomId}?token=${room.joinToken}`);
      // The read-only watch link: a socket with its key gets what the host publishes.
      const watchUrl = new URL(String(room.watchUrl));
      expect(watchUrl.pathname).toBe(`/watch/${room.roomId}`);
      const watcher = await SignalClient.connect(signalUrl(server.url), WebSocket as unknown as WebSocketConstructor);
      const views: ServerMessageOf<'view'>['data'][] = [];
      watcher.on('view', ({ data }) => views.push(data));
      const watching = await watcher.watch(String(room.roomId), watchUrl.searchParams.get('key') ?? '');
      if (watching.view) views.push(watching.view);
      const workerArgs = ['--server', server.url, '--room', String(room.roomId), '--token', String(room.joinToken)];
      const workers = [0, 1].map((i) =>
        start(`worker ${i}`, [
          'worker',
          ...workerArgs,
          '--backend',
          'cpu',
          '--json',
          ...(i === 0 ? ['--data', data] : []),
        ]),
      );
      const workerPeers = await until(
        () => {
          const peers = workers.map((w) => eventsOf(w, 'joined')[0]?.peer as string | undefined);
          return peers.every(Boolean) && (peers as string[]);
        },
        30_000,
        'both workers to join',
      );
      expect(eventsOf(workers[0] as Proc, 'joined')[0]?.host).toBeTruthy();
      const corpora = await until(
        () =>
          workers.map((w) => eventsOf(w, 'corpus')[0]).every(Boolean) && workers.map((w) => eventsOf(w, 'corpus')[0]),
        60_000,
        'both workers to load the room’s text',
      );
      const fingerprint = corpusFingerprint(text);
      expect(corpora[0]).toMatchObject({ source: 'file', bytes: text.length, fingerprint });
      expect(corpora[1]).toMatchObject({ source: 'mesh', name: 'room-text.txt', bytes: text.length, fingerprint });

      const firstEval = await until(
        () => eventsOf(host, 'metrics').find((m) => typeof m.evalLoss === 'number')?.evalLoss as number | undefined,
        30_000,
        'the first evaluation',
      );
      expect(Number.isFinite(firstEval)).toBe(true);
      await until(
        () => {
          // rounds that both workers took part in: the room trains together, not one worker alone
          const committed = eventsOf(host, 'round-committed').filter((e) => e.participants === 2);
          const perFragment = [0, 1].map((p) => committed.filter((e) => e.fragment === p).length);
          const improved = eventsOf(host, 'metrics').some(
            (m) => typeof m.evalLoss === 'number' && Number.isFinite(m.evalLoss) && m.evalLoss < firstEval,
          );
          return perFragment.every((n) => n >= 2) && improved;
        },
        150_000,
        'two commits of each fragment by both workers and a lower validation loss',
      );
      const trainedIn = performance.now() - startedAt;

      // The watcher saw the room: both workers in the peers table, tokens rising, rounds committed
      // (the views lag the host's events by up to a publish period).
      const seen = await until(
        () => {
          const last = views.at(-1);
          const peers = JSON.stringify(last?.peers.map((p) => p.peer).sort());
          const both = peers === JSON.stringify([...workerPeers].sort());
          // a worker's first commit can reach the host's view a publish later than the room's fourth
          const contributed = last?.peers.every((p) => p.roundsContributed > 0);
          return last && both && contributed && last.metrics.roundsCommitted >= 4 && last;
        },
        20_000,
        'a view with both workers, each in a committed round, and four commits',
      );
      expect(seen).toMatchObject({ roomId: room.roomId, hostKind: 'cli', status: 'running' });
      const tokens = views.flatMap((v) => v.points.map((p) => p.tokens));
      expect(tokens.length).toBeGreaterThan(3);
      expect(tokens.at(-1)).toBeGreaterThan(tokens[0] as number);
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThanOrEqual(tokens[i - 1] as number);
      expect(seen.rounds.some((r) => r.outcome === 'committed' && r.gatheredAt !== null)).toBe(true);
      for (const peer of seen.peers) {
        expect(peer).toMatchObject({ role: 'worker', backend: 'cpu', rejected: {} });
        expect(peer.roundsContributed).toBeGreaterThan(0);
      }
      expect(seen.metrics.evalLoss).toEqual(expect.any(Number));

      const joined = eventsOf(host, 'peer-joined').map((e) => e.peer);
      expect(joined.sort()).toEqual([...workerPeers].sort());
      for (const commit of eventsOf(host, 'round-committed')) {
        expect(commit.participants).toBeGreaterThanOrEqual(1);
        expect(commit.hash).toMatch(/^[0-9a-f]{32}$/);
      }
      const metrics = eventsOf(host, 'metrics').at(-1) as Record<string, unknown>;
      expect(Object.keys(metrics).sort()).toEqual(
        [
          'bytesReceived',
          'bytesSent',
          'evalBitsPerByte',
          'evalLoss',
          'event',
          'step',
          'tokens',
          'tokensPerSecond',
          'trainBitsPerByte',
          'trainLoss',
        ].sort(),
      );
      expect(metrics.evalBitsPerByte).toBe(bitsPerByte(metrics.evalLoss as number));
      expect(metrics.step).toBeGreaterThan(0);
      expect(metrics.tokens).toBeGreaterThan(0);
      expect(metrics.bytesReceived).toBeGreaterThan(0);

      for (const w of workers) w.child.kill('SIGINT');
      expect(await Promise.all(workers.map((w) => w.exit))).toEqual([0, 0]);
      await until(
        () => workerPeers.every((peer) => eventsOf(host, 'peer-left').some((e) => e.peer === peer)),
        15_000,
        'peer-left for both workers',
      );
      host.child.kill('SIGINT');
      expect(await host.exit).toBe(0);
      await until(() => views.at(-1)?.status === 'stopped', 5_000, 'the last view, on the way out');
      watcher.close();
      expect(statSync(join(checkpoints, CHECKPOINT_NAME)).size).toBeGreaterThan(0);
      expect(statSync(join(checkpoints, STATE_NAME)).size).toBeGreaterThan(0);
      const lastCommit = (p: number) =>
        eventsOf(host, 'round-committed')
          .filter((e) => e.fragment === p)
          .at(-1);

      // --resume: the same room (the server still has it), the same rounds and hashes, and a new
      // worker's first commits continue from there.
      const again = start('host again', [
        'host',
        ...['--server', server.url, '--resume', checkpoints, '--data', data, '--json'],
      ]);
      const back = await until(() => again.lines[1], 30_000, 'the resumed host’s first two lines');
      expect(again.lines[0]).toMatchObject({ event: 'room', roomId: room.roomId });
      expect(back).toMatchObject({ event: 'resumed', reclaimed: true });
      const resumed = back.fragments as { round: number; hash: string }[];
      for (const p of [0, 1]) expect(resumed[p]).toEqual({ round: lastCommit(p)?.round, hash: lastCommit(p)?.hash });
      const joinAgain = [
        '--server',
        server.url,
        '--room',
        String(room.roomId),
        '--token',
        String(again.lines[0]?.joinToken),
      ];
      const late = start('worker 2', ['worker', ...joinAgain, '--backend', 'cpu', '--json']);
      const next = await until(
        () => eventsOf(again, 'round-committed').find((e) => e.fragment === 0),
        60_000,
        'a commit after the resume',
      );
      expect(next.round).toBe((resumed[0]?.round ?? 0) + 1);
      // The watch link's charts go on across the resume: the same time axis, later points, the fp32
      // comparison from where it was (the resumed host read the kept view back from the server).
      const lastBefore = must(views.flatMap((v) => v.points).at(-1));
      const rewatcher = await SignalClient.connect(signalUrl(server.url), WebSocket as unknown as WebSocketConstructor);
      const later: ServerMessageOf<'view'>['data'][] = [];
      rewatcher.on('view', ({ data }) => later.push(data));
      const history = must((await rewatcher.watch(String(room.roomId), watchUrl.searchParams.get('key') ?? '')).view);
      const update = await until(() => later.find((v) => v.points.length > 0), 20_000, 'a view of the resumed host');
      rewatcher.close();
      expect(update.startedAt).toBe(seen.startedAt);
      expect(must(update.points[0]).t).toBeGreaterThan(lastBefore.t);
      expect(must(update.points.at(-1)).fp32Bytes).toBeGreaterThanOrEqual(lastBefore.fp32Bytes);
      const times = history.points.map((p) => p.t);
      expect(times).toEqual([...times].sort((a, b) => a - b));
      late.child.kill('SIGINT');
      expect(await late.exit).toBe(0);
      again.child.kill('SIGINT');
      expect(await again.exit).toBe(0);
      console.log(
        `host + 2 workers: ${eventsOf(host, 'round-committed').length} commits, eval ${firstEval.toFixed(3)} → ` +
          `${(metrics.evalLoss as number).toFixed(3)}, trained in ${(trainedIn / 1000).toFixed(1)} s`,
      );
    } finally {
      await server.close();
    }
  });
});

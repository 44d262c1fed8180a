/**
 * `shoal host` killed with SIGKILL mid-run, then `--resume`d:
 * the host and one `shoal worker --backend cpu` are child processes on real WebRTC over loopback
 * (as in host-worker.test.ts). The checkpoint the killed host left must hold every round it had
 * printed as committed except the one in flight per fragment; its files are 0600, and neither
 * the weights nor the run state carry the room's credentials (those live in room-credentials.json,
 * which `--resume` reads). A run state written before that split (the secret inside) still resumes,
 * and the next save takes the secret out of it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildLayout, encodeState } from '@shoal/model';
import { decodeRoomCheckpoint } from '@shoal/room';
import { startServer } from '@shoal/server';
import { afterAll, describe, expect, it } from 'vitest';
import { CHECKPOINT_NAME, CREDENTIALS_NAME, loadRoomCheckpoint, STATE_NAME } from './host-resume.ts';
import { loadWrtc } from './room.ts';
import { eventsOf, type Proc, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();

const lastCommitted = (p: Proc, fragment: number) =>
  (eventsOf(p, 'round-committed')
    .filter((e) => e.fragment === fragment)
    .at(-1)?.round as number | undefined) ?? 0;
const modeOf = (path: string) => statSync(path).mode & 0o777;
const contains = (bytes: Uint8Array, text: string) => Buffer.from(bytes).includes(Buffer.from(text, 'utf8'));

afterAll(killAll);

describe('shoal host killed with SIGKILL', () => {
  it('leaves a 0600 checkpoint without credentials that loses at most the round in flight per fragment, and --resume takes the room back', {
    timeout: 180_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const server = await startServer({ port: 0, logger: null });
    const dir = mkdtempSync(join(tmpdir(), 'shoal-crash-'));
    const paths = {
      weights: join(dir, CHECKPOINT_NAME),
      state: join(dir, STATE_NAME),
      credentials: join(dir, CREDENTIALS_NAME),
    };
    try {
      // nano, small steps: a round of each fragment every few hundred ms on one CPU worker; the
      // evaluation interval stays at its default (it had been the checkpoint interval)
      const training = ['--preset', 'nano', '--inner-steps', '4', '--batch', '2', '--eval-batches', '1'];
      const reporting = ['--metrics-every-ms', '200', '--publish-every-ms', '1000', '--json'];
      const host = start('host', ['host', '--server', server.url, ...training, ...reporting, '--checkpoint-dir', dir]);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      expect(room.event).toBe('room');
      const joinToken = String(room.joinToken);
      const watchKey = new URL(String(room.watchUrl)).searchParams.get('key') ?? '';
      const worker = start('worker', [
        'worker',
        ...['--server', server.url, '--room', String(room.roomId), '--token', joinToken],
        ...['--backend', 'cpu', '--json'],
      ]);
      await until(
        () => [0, 1].every((p) => eventsOf(host, 'round-committed').filter((e) => e.fragment === p).length >= 4),
        120_000,
        'four commits of each fragment',
      );

      host.child.kill('SIGKILL');
      await host.exit;
      const printed = [0, 1].map((p) => lastCommitted(host, p));
      const tokensAtKill = eventsOf(host, 'metrics').at(-1)?.tokens as number;
      // as --resume reads it: a kill between the save's two renames leaves the newer run state at
      // .partial, which the loader finishes (files.ts finishInterruptedWrite)
      const saved = loadRoomCheckpoint(dir);
      const roundsLost = printed.map((round, p) => round - (saved.state.fragments[p]?.round ?? 0));
      console.log(
        `SIGKILL: committed rounds printed ${printed.join(', ')}, in the checkpoint ` +
          `${saved.state.fragments.map((f) => f.round).join(', ')} (lost per fragment: ${roundsLost.join(', ')}); ` +
          `tokens ${tokensAtKill} at the last metrics line, ${saved.state.roomTokens} in the checkpoint ` +
          `(lost: ${Math.max(0, tokensAtKill - saved.state.roomTokens)}: the last metrics line can be older than the checkpoint)`,
      );
      // at most one round of a fragment is in flight, so at most its commit had not reached the disk
      for (const lost of roundsLost) expect.soft(lost).toBeLessThanOrEqual(1);
      // what the last checkpoint line announced is on disk (or a newer save, killed before its line)
      const announced = eventsOf(host, 'checkpoint').at(-1)?.fragments as { round: number }[] | undefined;
      for (const [p, f] of saved.state.fragments.entries())
        expect.soft(f.round, `fragment ${p}`).toBeGreaterThanOrEqual(announced?.[p]?.round ?? Number.POSITIVE_INFINITY);

      for (const path of Object.values(paths))
        expect.soft({ path, mode: existsSync(path) && modeOf(path).toString(8) }).toEqual({ path, mode: '600' });
      const credentials = JSON.parse(readFileSync(paths.credentials, 'utf8'));
      expect(credentials).toMatchObject({ roomId: room.roomId, joinToken, watchKey, hostSecret: expect.any(String) });
      const secrets = { hostSecret: String(credentials.hostSecret), joinToken, watchKey };
      for (const [name, secret] of Object.entries(secrets)) {
        expect(secret.length, name).toBeGreaterThan(8);
        for (const file of [paths.weights, paths.state])
          expect(contains(readFileSync(file), secret), `${name} in ${file}`).toBe(false);
      }

      // --resume: the credentials file takes the room back; the worker that stayed trains on from
      // the checkpoint's rounds.
      const again = start('host again', [
        'host',
        ...['--server', server.url, '--resume', dir, '--checkpoint-dir', dir, ...reporting],
      ]);
      const back = await until(() => again.lines[1], 30_000, 'the resumed host’s first two lines');
      expect(again.lines[0]).toMatchObject({ event: 'room', roomId: room.roomId });
      expect(back).toMatchObject({
        event: 'resumed',
        reclaimed: true,
        roomTokens: saved.state.roomTokens,
        step: saved.state.step,
      });
      expect(saved.state.step).toBeGreaterThan(0);
      expect(back.fragments).toEqual(saved.state.fragments);
      const next = await until(
        () =>
          [0, 1].every((p) => eventsOf(again, 'round-committed').some((e) => e.fragment === p)) &&
          eventsOf(again, 'round-committed'),
        60_000,
        'a commit of each fragment after the resume',
      );
      for (const [p, f] of saved.state.fragments.entries())
        expect(next.find((e) => e.fragment === p)?.round).toBeGreaterThan(f.round);
      // the room's step goes on from the saved one: on past it, and never below it on the way
      const savedStep = saved.state.step ?? Number.POSITIVE_INFINITY;
      await until(
        () => eventsOf(again, 'metrics').some((e) => (e.step as number) > savedStep),
        30_000,
        'a metrics line past the saved step',
      );
      const steps = eventsOf(again, 'metrics').map((e) => e.step as number);
      expect(Math.min(...steps)).toBeGreaterThanOrEqual(savedStep);
      // the worker leaves first: a host stops at once only when no round is open (an open round's
      // coordinator deadline holds its process up to 2 × --deadline-ms)
      worker.child.kill('SIGINT');
      expect(await worker.exit).toBe(0);
      again.child.kill('SIGINT');
      expect(await again.exit).toBe(0);
      const last = decodeRoomCheckpoint(readFileSync(paths.weights), readFileSync(paths.state));
      expect(last.state.fragments.map((f) => f.round)).toEqual([0, 1].map((p) => lastCommitted(again, p)));
      expect(last.state.room).toBeNull();

      // A checkpoint from before the split: the secret inside the run state, no credentials file.
      // It still resumes (the room is taken back), and its first save writes the state without it.
      const legacyState = {
        ...last.state,
        room: { roomId: String(room.roomId), hostSecret: secrets.hostSecret, joinToken },
      };
      writeFileSync(
        paths.state,
        encodeState(buildLayout(last.state.config.model), { 'outer.m': last.momentum }, legacyState),
        { mode: 0o644 },
      );
      rmSync(paths.credentials);
      const legacy = start('host from an old checkpoint', [
        'host',
        ...['--server', server.url, '--resume', dir, '--checkpoint-dir', dir, ...reporting],
      ]);
      await until(() => legacy.lines[1], 30_000, 'the resumed host’s first two lines');
      expect(legacy.lines[0]).toMatchObject({ event: 'room', roomId: room.roomId });
      expect(legacy.lines[1]).toMatchObject({ event: 'resumed', reclaimed: true });
      await until(() => eventsOf(legacy, 'checkpoint').length > 0, 30_000, 'the save at the start');
      legacy.child.kill('SIGINT');
      expect(await legacy.exit).toBe(0);
      expect(contains(readFileSync(paths.state), secrets.hostSecret)).toBe(false);
      expect(modeOf(paths.state)).toBe(0o600);
      expect(JSON.parse(readFileSync(paths.credentials, 'utf8'))).toMatchObject({ hostSecret: secrets.hostSecret });
      expect(modeOf(paths.credentials)).toBe(0o600);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

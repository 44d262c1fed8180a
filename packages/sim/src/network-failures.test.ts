import { describe, expect, it } from 'vitest';
import type { SimNetworkOptions } from './network.ts';
import { message, outcome, record, simNetwork } from './test-network.ts';

/** A network of `peers`, all up for each other, every event recorded in `log`. */
async function room(peers: string[], options: SimNetworkOptions) {
  const { clock, network } = simNetwork(options);
  const log: string[] = [];
  const transports = Object.fromEntries(peers.map((peer) => [peer, network.join(peer)]));
  await clock.runAsync();
  for (const transport of Object.values(transports)) record(clock, transport, log);
  const at = (ms: number, action: () => void) => clock.scheduleAt(ms, action);
  return { clock, network, log, at, t: (peer: string) => transports[peer] ?? network.join(peer) };
}

describe('SimNetwork: crashes', () => {
  it('drops what is in flight from and to a crashed peer; the others see it down after detectionMs', async () => {
    const { clock, network, log, at, t } = await room(['a', 'b', 'c'], {
      latencyMs: 10,
      upMbps: 8,
      detectionMs: 100,
    });
    const sends: string[] = [];
    outcome(clock, t('a').send('c', message(125, 1)), sends); // left at 0.125, on the wire at the crash
    outcome(clock, t('a').send('b', message(8000, 2)), sends); // leaving at the crash
    outcome(clock, t('b').send('a', message(125, 3)), sends); // on the wire to a at the crash
    at(5, () => network.crash('a'));
    at(50, () => outcome(clock, t('b').send('a', message(125, 4)), sends)); // b does not know yet: lost
    at(110, () => outcome(clock, t('b').send('a', message(125, 5)), sends));
    await clock.runAsync();
    expect(sends).toEqual(['0.125 ok', '0.125 ok', '5 closed', '50.125 ok', '110 peer-not-up']);
    expect(log).toEqual(['105 b: down a crashed', '105 c: down a crashed']);
    expect(t('a').state).toBe('crashed');
    expect(t('a').peers()).toEqual([]);
    await expect(t('a').send('b', message(1))).rejects.toMatchObject({ code: 'closed' });
    expect(network.stats('a')).toMatchObject({ messagesSent: 1, messagesLost: 1, bytesReceived: 0 });
    expect(network.stats('b')).toMatchObject({ messagesSent: 2, messagesLost: 2 });
    expect(network.livePeers()).toEqual(['b', 'c']);
    expect(() => network.crash('a')).toThrow(/not a live member/);
  });

  it('crashes a peer right after it sent the first matching message, which still arrives', async () => {
    const { clock, network, log, t } = await room(['w', 'o1', 'o2', 'o3'], {
      latencyMs: 10,
      upMbps: 8,
      detectionMs: 100,
    });
    const SHARD = 7;
    network.crashAfterSend('w', (_, bytes) => bytes[0] === SHARD);
    const sends: string[] = [];
    outcome(clock, t('w').send('o2', message(1000, 1)), sends); // a control message first
    for (const owner of ['o1', 'o2', 'o3']) outcome(clock, t('w').send(owner, message(1000, SHARD)), sends);
    await clock.runAsync();
    // the shard to o1 leaves at 2 ms and w crashes then: the others never leave
    expect(sends).toEqual(['1 ok', '2 ok', '2 closed', '2 closed']);
    expect(log).toEqual([
      '11 o2: #1/1000 from w',
      '12 o1: #7/1000 from w',
      '102 o1: down w crashed',
      '102 o2: down w crashed',
      '102 o3: down w crashed',
    ]);
  });

  it('counts crashAfterSend matches and lets a send hook drop messages', async () => {
    const { clock, network, log, t } = await room(['a', 'b'], {});
    network.crashAfterSend('a', (to) => to === 'b', 3);
    const removeDrop = network.onSend('a', (_, bytes) => (bytes[0] === 0 ? 'drop' : 'deliver'));
    for (const tag of [1, 0, 2, 3, 4])
      void t('a')
        .send('b', message(1, tag))
        .catch(() => {});
    await clock.runAsync();
    // 1 passes, 0 is dropped (the drop hook runs after the crash hook, which counted it), 2 is the 3rd match
    expect(log).toEqual(['0 b: #1/1 from a', '0 b: #2/1 from a', '1000 b: down a crashed']);
    expect(network.stats('a')).toMatchObject({ messagesSent: 3, messagesLost: 1 });
    removeDrop();
    expect(() => network.crashAfterSend('b', () => true, 0)).toThrow(RangeError);
  });

  it('lets a crashed peer join again as a new incarnation that nothing of the old one reaches', async () => {
    const { clock, network, log, at, t } = await room(['a', 'b'], { latencyMs: 10, detectionMs: 100 });
    const a2Log: string[] = [];
    at(0, () => network.crash('a'));
    at(10, () => {
      const a2 = network.join('a');
      record(clock, a2, a2Log);
    });
    at(20, () => void t('b').send('a', message(1, 1))); // b still sees the old a: lost
    at(30, () => void network.transport('a')?.send('b', message(1, 2)));
    at(200, () => void t('b').send('a', message(1, 3)));
    await clock.runAsync();
    // b learns of the new a only after the old one is down, and a's message waits behind both
    expect(log).toEqual(['100 b: down a crashed', '100 b: up a', '100 b: #2/1 from a']);
    expect(a2Log).toEqual(['10 a: up b', '210 a: #3/1 from b']);
    expect(network.stats('b')).toMatchObject({ messagesLost: 1, messagesReceived: 1 });
  });
});

describe('SimNetwork: leaving and partitions', () => {
  it("delivers what had left a closing peer's uplink, then peer-down 'left'; rejects the rest", async () => {
    const { clock, log, t } = await room(['a', 'b', 'c'], { latencyMs: 10, upMbps: 8 });
    const sends: string[] = [];
    const closer = (async () => {
      const first = t('a').send('b', message(1000, 1)); // leaves 0→1
      outcome(clock, first, sends);
      outcome(clock, t('a').send('b', message(1000, 2)), sends); // leaving when a closes
      await first;
      await t('a').close();
      await t('a').close(); // harmless
    })();
    await clock.runAsync();
    await closer;
    expect(sends).toEqual(['1 ok', '1 closed']);
    expect(log).toEqual(['11 b: #1/1000 from a', '11 b: down a left', '11 c: down a left']);
    expect(t('a').state).toBe('closed');
    await expect(t('a').send('b', message(1))).rejects.toMatchObject({ code: 'closed' });
  });

  it('loses traffic across a partition, reports both sides unreachable, and heals', async () => {
    const { clock, network, log, at, t } = await room(['a', 'b', 'c'], {
      latencyMs: 10,
      detectionMs: 50,
      connectMs: 5,
    });
    const sends: string[] = [];
    expect(clock.now()).toBe(5); // the members came up at connectMs
    at(5, () => void t('a').send('b', message(1, 1)));
    at(10, () => network.partition('a', 'b'));
    at(20, () => outcome(clock, t('b').send('a', message(1, 2)), sends));
    at(20, () => void t('a').send('c', message(1, 3)));
    at(65, () => outcome(clock, t('a').send('b', message(1, 4)), sends));
    at(100, () => network.heal('a', 'b'));
    at(110, () => void t('a').send('b', message(1, 5)));
    await clock.runAsync();
    expect(sends).toEqual(['20 ok', '65 peer-not-up']);
    expect(log).toEqual([
      '30 c: #3/1 from a',
      '60 b: down a unreachable',
      '60 a: down b unreachable',
      '105 b: up a',
      '105 a: up b',
      '120 b: #5/1 from a',
    ]);
    expect(network.isPartitioned('b', 'a')).toBe(false);
    expect(network.stats('a').messagesLost).toBe(1);
    expect(network.stats('b').messagesLost).toBe(1);
    expect(() => network.partition('a', 'a')).toThrow(/itself/);
  });
});

describe('SimNetwork: determinism', () => {
  /** Random traffic from a seeded generator, a crash, a partition and a rejoin; returns the event log. */
  async function chaos(seed: number): Promise<string[]> {
    let state = seed;
    const random = () => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
    const peers = ['p0', 'p1', 'p2', 'p3', 'p4'];
    const { clock, network, log, at } = await room(peers, {
      latencyMs: (from, to) => 5 + ((from.charCodeAt(1) * 7 + to.charCodeAt(1)) % 20),
      upMbps: 10,
      downMbps: 40,
      detectionMs: 200,
    });
    const actors = peers.map(async (peer) => {
      for (let i = 0; i < 40; i++) {
        await clock.sleep(Math.floor(random() * 30));
        const transport = network.transport(peer);
        const to = transport?.peers()[Math.floor(random() * 4)];
        if (transport === undefined || to === undefined) continue;
        await transport.send(to, message(1 + Math.floor(random() * 20000), i)).catch(() => {});
      }
    });
    at(150, () => network.crash('p3'));
    at(300, () => network.partition('p0', 'p1'));
    at(500, () => record(clock, network.join('p3', { upMbps: 2 }), log));
    at(700, () => network.heal('p0', 'p1'));
    await clock.runAsync();
    await Promise.all(actors);
    const stats = peers.map((peer) => JSON.stringify(network.stats(peer)));
    return [...log, ...stats, `end ${clock.now()}`];
  }

  it('produces identical event logs from identical runs', async () => {
    const first = await chaos(1);
    expect(first.length).toBeGreaterThan(100);
    expect(first.some((line) => line.includes('down p3 crashed'))).toBe(true);
    expect(first.some((line) => line.includes('down p1 unreachable'))).toBe(true);
    expect(await chaos(1)).toEqual(first);
    expect(await chaos(2)).not.toEqual(first);
  });
});

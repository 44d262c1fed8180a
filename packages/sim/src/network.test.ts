import { TransportError } from '@shoal/protocol';
import { describe, expect, it } from 'vitest';
import { serializationMs } from './links.ts';
import { message, outcome, record, simNetwork } from './test-network.ts';

// Sizes are chosen so that every time below is exact in binary floating point:
// 1000 bytes at 8 Mbit/s take 1 ms, at 16 Mbit/s 0.5 ms; 125 bytes at 8 Mbit/s take 0.125 ms.

describe('SimNetwork: membership', () => {
  it('brings members up for each other after connectMs, never synchronously', async () => {
    const { clock, network } = simNetwork({ connectMs: 3 });
    const log: string[] = [];
    const a = network.join('a');
    record(clock, a, log);
    const b = network.join('b');
    record(clock, b, log);
    expect(a.peers()).toEqual([]);
    await expect(a.send('b', message(1))).rejects.toMatchObject({ code: 'peer-not-up', name: 'TransportError' });
    await clock.runAsync();
    const c = network.join('c');
    record(clock, c, log);
    await clock.runAsync();
    expect(log).toEqual(['3 a: up b', '3 b: up a', '6 a: up c', '6 c: up a', '6 b: up c', '6 c: up b']);
    expect(c.peers()).toEqual(['a', 'b']);
    expect(network.livePeers()).toEqual(['a', 'b', 'c']);
    expect(() => network.join('b')).toThrow(/already a member/);
  });

  it('rejects sends to itself, to strangers and over the size limit', async () => {
    const { clock, network } = simNetwork({ maxMessageBytes: 100 });
    const a = network.join('a');
    network.join('b');
    await clock.runAsync();
    await expect(a.send('a', message(1))).rejects.toMatchObject({ code: 'peer-not-up' });
    await expect(a.send('nobody', message(1))).rejects.toMatchObject({ code: 'peer-not-up' });
    await expect(a.send('b', message(101))).rejects.toBeInstanceOf(TransportError);
    await expect(a.send('b', message(101))).rejects.toMatchObject({ code: 'too-large' });
    const sent = a.send('b', message(100));
    await clock.runAsync(); // a send resolves in virtual time: something must run the clock
    await expect(sent).resolves.toBeUndefined();
  });
});

describe('SimNetwork: timing', () => {
  it('takes latency + bytes·8/min(up, down) for a lone message, and resolves send when it has left', async () => {
    expect(serializationMs(1000, 8)).toBe(1);
    expect(serializationMs(1000, Number.POSITIVE_INFINITY)).toBe(0);
    const { clock, network } = simNetwork({ latencyMs: 10 });
    const a = network.join('a', { upMbps: 8, downMbps: 100 });
    const fast = network.join('fast', { downMbps: 16 });
    const slow = network.join('slow', { downMbps: 4 });
    await clock.runAsync();
    const log: string[] = [];
    record(clock, fast, log);
    record(clock, slow, log);
    outcome(clock, a.send('fast', message(1000, 1)), log); // leaves 0→1, arrives 10→11
    outcome(clock, a.send('slow', message(1000, 2)), log); // leaves 1→2, downlink 11→13
    await clock.runAsync();
    expect(log).toEqual(['1 ok', '2 ok', '11 fast: #1/1000 from a', '13 slow: #2/1000 from a']);
  });

  it('queues every message of a sender in one uplink FIFO, and keeps each pair in order', async () => {
    const { clock, network } = simNetwork({ latencyMs: 10, upMbps: 8, downMbps: 16 });
    const a = network.join('a');
    const b = network.join('b');
    const c = network.join('c');
    await clock.runAsync();
    const log: string[] = [];
    record(clock, b, log);
    record(clock, c, log);
    outcome(clock, a.send('b', message(8000, 1)), log); // leaves 0→8, last bit at b 18
    outcome(clock, a.send('b', message(125, 2)), log); // leaves 8→8.125, first bit 18, last 18.125
    outcome(clock, a.send('c', message(125, 3)), log); // leaves 8.125→8.25, at c 18.25
    await clock.runAsync();
    expect(log).toEqual([
      '8 ok',
      '8.125 ok',
      '8.25 ok',
      '18 b: #1/8000 from a',
      '18.125 b: #2/125 from a',
      '18.25 c: #3/125 from a',
    ]);
  });

  it("shares a receiver's downlink between concurrent senders at the receiver's rate", async () => {
    for (const [downMbps, expected] of [
      [16, [11, 11, 11.5, 12]], // 4 × 8 Mbit/s into 16: the downlink is the bottleneck after two
      [8, [11, 12, 13, 14]],
      [Number.POSITIVE_INFINITY, [11, 11, 11, 11]],
    ] as const) {
      const { clock, network } = simNetwork({ latencyMs: 10, upMbps: 8 });
      const sink = network.join('sink', { downMbps });
      const senders = ['s0', 's1', 's2', 's3'].map((peer) => network.join(peer));
      await clock.runAsync();
      const arrivals: string[] = [];
      sink.on('message', (from) => arrivals.push(`${clock.now()} ${from}`));
      for (const sender of senders) void sender.send('sink', message(1000));
      await clock.runAsync();
      expect(arrivals).toEqual(expected.map((at, i) => `${at} s${i}`));
    }
  });

  it('applies backpressure: a sender that awaits each send keeps its uplink busy without gaps', async () => {
    const { clock, network } = simNetwork({ latencyMs: 10, upMbps: 8 });
    const a = network.join('a');
    const b = network.join('b');
    await clock.runAsync();
    const resolved: number[] = [];
    const arrived: number[] = [];
    b.on('message', () => arrived.push(clock.now()));
    const sender = (async () => {
      for (let i = 0; i < 5; i++) {
        await a.send('b', message(1000, i));
        resolved.push(clock.now());
      }
    })();
    await clock.runAsync();
    await sender;
    expect(resolved).toEqual([1, 2, 3, 4, 5]);
    expect(arrived).toEqual([11, 12, 13, 14, 15]);
  });

  it('uses per-pair latency and asymmetric links, changeable between messages', async () => {
    const { clock, network } = simNetwork({ latencyMs: (from, to) => (from < to ? 5 : 20) });
    const a = network.join('a', { upMbps: 8, downMbps: 64 });
    const b = network.join('b', { upMbps: 64, downMbps: 8 });
    await clock.runAsync();
    const log: string[] = [];
    record(clock, a, log);
    record(clock, b, log);
    void a.send('b', message(1000, 1)); // a→b: 5 ms, 8 Mbit/s both ends: 6
    void b.send('a', message(1000, 2)); // b→a: 20 ms, 64 Mbit/s both ends: 20.125
    await clock.runAsync();
    network.setLatency('a', 'b', 1);
    network.setRates('a', { upMbps: 16 });
    void a.send('b', message(1000, 3)); // leaves 20.125→20.625, downlink (8 Mbit/s) 21.125→22.125
    await clock.runAsync();
    expect(log).toEqual(['6 b: #1/1000 from a', '20.125 a: #2/1000 from b', '22.125 b: #3/1000 from a']);
  });

  it('counts bytes and messages per peer, copies what is sent, and delivers zero-byte messages', async () => {
    const { clock, network } = simNetwork({ latencyMs: 1, upMbps: 8 });
    const a = network.join('a');
    const b = network.join('b');
    await clock.runAsync();
    const received: Uint8Array[] = [];
    b.on('message', (_, bytes) => received.push(bytes));
    const buffer = message(1000, 9);
    void a.send('b', buffer);
    buffer[0] = 42; // the caller broke the contract; the message left as it was
    void a.send('b', new Uint8Array(0));
    void b.send('a', message(250));
    await clock.runAsync();
    expect(received.map((bytes) => [bytes[0], bytes.length])).toEqual([
      [9, 1000],
      [undefined, 0],
    ]);
    expect(network.stats('a')).toEqual({
      bytesSent: 1000,
      bytesReceived: 250,
      messagesSent: 2,
      messagesReceived: 1,
      messagesLost: 0,
    });
    expect(network.stats('b')).toMatchObject({ bytesSent: 250, bytesReceived: 1000, messagesReceived: 2 });
    expect(() => network.stats('nobody')).toThrow(/never joined/);
  });
});

import { describe, expect, it } from 'vitest';
import { CONTROL_BYTES, decodeControl, encodeControl, isControlFrame } from './control.ts';
import { waitForDrain } from './drain.ts';

describe('control frames', () => {
  it('round-trips every kind with its nonce', () => {
    for (const kind of ['ping', 'pong', 'bye'] as const) {
      const frame = encodeControl(kind, 0xdead_beef);
      expect(frame.length).toBe(CONTROL_BYTES);
      expect(isControlFrame(frame)).toBe(true);
      expect(decodeControl(frame)).toEqual({ kind, nonce: 0xdead_beef });
    }
  });

  it('refuses malformed frames without throwing', () => {
    const good = encodeControl('ping', 1);
    expect(decodeControl(good.subarray(0, 7))).toBeNull();
    expect(decodeControl(Uint8Array.of(...good, 0))).toBeNull();
    expect(decodeControl(Uint8Array.of(0x53, 0x6b, 2, 1, 0, 0, 0, 0))).toBeNull(); // version
    expect(decodeControl(Uint8Array.of(0x53, 0x6b, 1, 0, 0, 0, 0, 0))).toBeNull(); // kind
    expect(decodeControl(Uint8Array.of(0x53, 0x63, 1, 1, 0, 0, 0, 0))).toBeNull(); // a chunk's magic
    expect(decodeControl(new Uint8Array(0))).toBeNull();
  });
});

describe('waitForDrain', () => {
  const fakeChannel = (bufferedAmount: number) => ({ bufferedAmount, bufferedAmountLowThreshold: 0 });

  it('resolves at once below the low-water mark, and by polling once it drains', async () => {
    const controller = new AbortController();
    await waitForDrain(fakeChannel(10), 100, controller.signal);
    const channel = fakeChannel(1000);
    let done = false;
    const waiting = waitForDrain(channel, 100, controller.signal).then(() => {
      done = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(false);
    expect(channel.bufferedAmountLowThreshold).toBe(100);
    channel.bufferedAmount = 50;
    await waiting;
    expect(done).toBe(true);
  });

  it('resolves when aborted (the peer went down)', async () => {
    const controller = new AbortController();
    const waiting = waitForDrain(fakeChannel(1000), 100, controller.signal);
    controller.abort();
    await waiting;
  });
});

/**
 * Waiting for a data channel's send buffer to drain: the `bufferedamountlow` event where the
 * implementation fires it, and polling beside it, because some (older wrtc builds, some browsers
 * after a renegotiation) do not fire it reliably.
 */

/** What the mesh reads from an RTCDataChannel (browser or @roamhq/wrtc). */
export interface DataChannelLike {
  readonly bufferedAmount: number;
  bufferedAmountLowThreshold: number;
  addEventListener?: (type: 'bufferedamountlow', listener: () => void) => void;
  removeEventListener?: (type: 'bufferedamountlow', listener: () => void) => void;
}

const DRAIN_POLL_MS = 5;

/** Resolves once `channel.bufferedAmount ≤ lowWaterMark`, or when `signal` aborts. */
export function waitForDrain(channel: DataChannelLike, lowWaterMark: number, signal: AbortSignal): Promise<void> {
  if (channel.bufferedAmount <= lowWaterMark || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => {
      if (channel.bufferedAmount <= lowWaterMark || signal.aborted) finish();
    };
    const finish = () => {
      clearInterval(timer);
      channel.removeEventListener?.('bufferedamountlow', check);
      signal.removeEventListener('abort', finish);
      resolve();
    };
    // simple-peer sets its own threshold (64 KiB) for its stream API, which the mesh does not use
    channel.bufferedAmountLowThreshold = lowWaterMark;
    channel.addEventListener?.('bufferedamountlow', check);
    signal.addEventListener('abort', finish);
    const timer = setInterval(check, DRAIN_POLL_MS);
  });
}

/**
 * Memory and amplification: buffers a stranger can fill and answers far larger than
 * the question. What the victims hold is measured by the room (room.ts: future-round messages
 * they kept, state they queued towards the attacker); the chunk probe measures the mesh's
 * reassembler directly, since the in-memory network carries whole messages.
 */
import {
  ByteBudget,
  CHUNK_HEADER_BYTES,
  chunkSpan,
  DEFAULT_MAX_MESSAGE_BYTES,
  maxMessageBytesFor,
  type PeerId,
  peerBudgetFor,
  Reassembler,
  type RunConfig,
  STATE_PART_VALUES,
  writeChunkHeader,
} from '@shoal/protocol';
import type { Attack, AttackContext, HostilePeer, ProbeOutcome } from './types.ts';

/** Rounds ahead of the latest open one: never opened within a run, so kept until refused. */
const FAR_AHEAD = 1000;
/** Payload of one flood message: 16 KiB, an ordinary size for a contribution shard. */
const FLOOD_PAYLOAD_BYTES = 16 * 1024;
/** Per victim: a few beyond the workers' early buffer (1024) and the replicas' (256) today. */
const FUTURE_CONTRIBUTIONS = 1100;
const FUTURE_RESULTS = 300;
/** Flood messages per victim per 100 ms tick (the attacker's uplink paces them anyway). */
const FLOOD_BATCH = 50;
/**
 * A state request per victim every this many ms, this many times (5 s): a nano fragment's answer
 * (564 KB) every 50 ms is 90 Mbit/s, more than a victim's 50 Mbit/s uplink carries.
 */
const STATE_REQUEST_EVERY_MS = 50;
const STATE_REQUESTS = 100;
/** Chunk data in each forged first chunk: 16 KiB, as in the issue. */
const CHUNK_DATA_BYTES = 16 * 1024;

/** Sends `total` messages made by `make(i)` to each of `victims`, FLOOD_BATCH per 100 ms. */
function flood(
  context: AttackContext,
  hostile: HostilePeer,
  victims: readonly PeerId[],
  total: number,
  make: (i: number) => Parameters<AttackContext['forge']>[2],
): void {
  let sent = 0;
  context.every(100, () => {
    for (const end = Math.min(total, sent + FLOOD_BATCH); sent < end; sent++) {
      context.forge(hostile.peer, victims, make(sent));
    }
  });
}

export const MEMORY_ATTACKS: Attack[] = [
  {
    name: 'future-round-contributions',
    family: 'memory',
    summary: `${FUTURE_CONTRIBUTIONS} contributions of 16 KiB for rounds ${FAR_AHEAD}+ ahead, to every worker`,
    install(context, hostile) {
      const payload = new Uint8Array(FLOOD_PAYLOAD_BYTES);
      flood(context, hostile, context.honest, FUTURE_CONTRIBUTIONS, (i) => ({
        kind: 'contribution',
        fragment: 0,
        round: context.latestRound(0) + FAR_AHEAD + i,
        shard: 0,
        codec: context.config.diloco.codec,
        weight: 1,
        payload,
      }));
    },
  },
  {
    name: 'future-round-results',
    family: 'memory',
    summary: `${FUTURE_RESULTS} shard results of 16 KiB for rounds ${FAR_AHEAD}+ ahead, to every replica`,
    install(context, hostile) {
      const payload = new Uint8Array(FLOOD_PAYLOAD_BYTES);
      // a result with a payload names the contributions in it: every worker's, as an owner's would
      const verdicts = [...context.honest, hostile.peer].map((peer) => ({
        peer,
        weight: 1,
        reason: '' as const,
        message: '',
      }));
      flood(context, hostile, [context.coordinator, ...context.honest], FUTURE_RESULTS, (i) => ({
        kind: 'shard-result',
        fragment: 0,
        round: context.latestRound(0) + FAR_AHEAD + i,
        shard: 0,
        codec: context.config.diloco.codec,
        verdicts,
        payload,
      }));
    },
  },
  {
    name: 'state-request-flood',
    family: 'memory',
    summary: `${STATE_REQUESTS} state requests (a whole fragment each) to every replica, one every ${STATE_REQUEST_EVERY_MS} ms`,
    install(context, hostile) {
      let next = 0;
      context.every(STATE_REQUEST_EVERY_MS, () => {
        if (next >= STATE_REQUESTS) return;
        const fragment = next++ % context.fragments.length;
        const size = context.fragments[fragment]?.size ?? 0;
        context.forge(hostile.peer, [context.coordinator, ...context.honest], {
          kind: 'state-request',
          fragment,
          start: 0,
          end: Math.min(size, STATE_PART_VALUES),
        });
      });
    },
  },
  {
    name: 'oversized-chunk-announcements',
    family: 'memory',
    summary: 'first chunks of 16 KiB announcing messages of up to 256 MiB, to the mesh reassembler',
    probe: probeChunkAnnouncements,
  },
];

/**
 * A peer's first chunks, each announcing as large a message as the receiver might take: 256 MiB,
 * then half of that, and so on, 16 messages. The receiver is built as the mesh builds one per
 * peer once the run is known (packages/mesh/src/peer-buffers.ts): the run's message limit and
 * a byte budget per peer.
 */
function probeChunkAnnouncements(config: RunConfig): ProbeOutcome {
  const maxMessageBytes = maxMessageBytesFor(config);
  const budget = new ByteBudget(peerBudgetFor(maxMessageBytes));
  const reassembler = new Reassembler({ now: () => 0, maxMessageBytes, budget });
  let refusals = 0;
  let bytesHeld = 0;
  let messageId = 1;
  for (let total = DEFAULT_MAX_MESSAGE_BYTES; messageId <= 16; total = Math.floor(total / 2)) {
    const count = Math.ceil(total / CHUNK_DATA_BYTES);
    const [start, end] = chunkSpan(0, count, total);
    const chunk = new Uint8Array(CHUNK_HEADER_BYTES + end - start);
    // index 0: a first chunk is what made a receiver reserve the whole message
    writeChunkHeader(chunk, { messageId: messageId++, index: 0, count, totalBytes: total });
    if (reassembler.push(chunk).status === 'rejected') refusals++;
    bytesHeld = Math.max(bytesHeld, reassembler.pendingBytes, budget.held);
  }
  reassembler.clear();
  return { bytesHeld, refusals, scope: "one peer's chunk reassembler, as the mesh builds it (not the in-memory room)" };
}

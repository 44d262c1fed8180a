/**
 * A shard owner that lies: its aggregate scaled, flipped
 * or withheld, and a non-owner that races the real owner with a result of its own.
 */
import { roundCodec } from '@shoal/swarm';
import { everyoneBut, transformPayload } from './forge.ts';
import type { Attack, AttackContext, HostilePeer } from './types.ts';

/** The hostile owner's shard results, every value times `factor`. */
function scaledResults(context: AttackContext, hostile: HostilePeer, factor: number): void {
  context.rewrite(hostile.peer, 'shard-result', (_to, message) => {
    const payload = transformPayload(context, message, (values) => values.map((v) => v * factor));
    return payload ? { ...message, payload } : null;
  });
}

/**
 * Per coordinate, a forged Δ̄ of 0.05: an honest one is about 1e-3 (lr 3e-3 over H steps, partly
 * cancelling), so the outer step it causes is some fifty times too large, every round.
 */
const FORGED_RESULT_VALUE = 0.05;

export const OWNER_ATTACKS: Attack[] = [
  {
    name: 'owner-scales-result',
    family: 'owner',
    summary: 'a shard owner sends its aggregate ×100',
    install: (context, hostile) => scaledResults(context, hostile, 100),
  },
  {
    name: 'owner-flips-result',
    family: 'owner',
    summary: "a shard owner sends its aggregate's sign flipped",
    install: (context, hostile) => scaledResults(context, hostile, -1),
  },
  {
    name: 'owner-withholds-result',
    family: 'owner',
    summary: 'a shard owner never sends its result (and stays up)',
    install: (context, hostile) => context.rewrite(hostile.peer, 'shard-result', () => 'drop'),
  },
  {
    name: 'forged-shard-result',
    family: 'owner',
    summary: 'a non-owner sends every other shard a forged result as soon as the round opens',
    install(context, hostile) {
      hostile.member.on('round-open', (from, open) => {
        if (from !== context.coordinator || !context.isActive()) return;
        const codec = roundCodec(open);
        // it claims every participant's contribution was in, as an owner's result would
        const verdicts = open.participants.map((peer) => ({ peer, weight: 1, reason: '' as const, message: '' }));
        for (const [shard, range] of open.shards.entries()) {
          if (range.owner === hostile.peer) continue;
          const values = new Float32Array(range.end - range.start).fill(FORGED_RESULT_VALUE);
          const payload = codec.encode(values);
          context.forge(hostile.peer, everyoneBut(hostile), {
            kind: 'shard-result',
            fragment: open.fragment,
            round: open.round,
            shard,
            codec: open.codec,
            verdicts,
            payload,
          });
        }
      });
    },
  },
];

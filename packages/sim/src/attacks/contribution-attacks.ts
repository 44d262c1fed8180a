/**
 * A participant whose contributions are poison: a
 * scaled Δ, a finite but enormous one, a reversed one every round, and an inflated token weight.
 * Each rewrites the hostile worker's real contribution on its way to the shard owners.
 *
 * And one that scales its own Δ (docs/robust-aggregation.md): ×100 inside the
 * worker, before encoding, clipped per value to what owners accept, so every copy of it (its own
 * shard included), its hash and its signature are those of an honest-looking worker whose Δ
 * happens to be large. No check can refuse it; only the aggregation rule can limit it.
 */
import type { Codec } from '@shoal/diloco';
import { contributionBound } from '@shoal/swarm';
import { transformPayload } from './forge.ts';
import type { Attack, AttackContext, HostilePeer } from './types.ts';

/** The largest magnitude of the 'huge' contribution: finite in fp32 (max ≈ 3.4e38), as in the issue. */
const HUGE_VALUE = 3e38;

/** Rewrites contributions of the rounds `applies` accepts, values through `change`. */
function poisonContributions(
  context: AttackContext,
  hostile: HostilePeer,
  change: (values: Float32Array) => Float32Array,
  applies: (fragment: number, round: number) => boolean = () => true,
): void {
  context.rewrite(hostile.peer, 'contribution', (_to, message) => {
    if (!applies(message.fragment, message.round)) return null;
    const payload = transformPayload(context, message, change);
    return payload ? { ...message, payload } : null;
  });
}

/** Values scaled so that the largest magnitude is HUGE_VALUE (signs and proportions kept). */
function huge(values: Float32Array): Float32Array {
  let max = 0;
  for (const v of values) max = Math.max(max, Math.abs(v));
  const scale = max > 0 ? HUGE_VALUE / max : 0;
  return values.map((v) => (max > 0 ? v * scale : HUGE_VALUE));
}

/** What the worker's rounds encode a dense Δ with (ContributionEncoder.encodeDense, private there). */
interface DenseEncoder {
  encodeDense(p: number, codec: Codec, delta: Float32Array): Uint8Array;
}

/**
 * Multiplies the hostile worker's own Δ by `factor` just before it is encoded (after its own
 * clamp into half the bound), each value clipped to just under contributionBound so that no owner
 * refuses it as 'magnitude' (fp4 decodes a block's largest value exactly). From the attack's start.
 */
function scaleOwnDelta(context: AttackContext, hostile: HostilePeer, factor: number): void {
  const bound = contributionBound(context.config) * (1 - 1e-6);
  const patched = new WeakSet<object>();
  // the worker builds its rounds when it is welcomed (again after a rejoin): patch each once
  context.every(10, () => {
    const rounds = (hostile.worker as unknown as { rounds: { encoder: DenseEncoder } | null }).rounds;
    const encoder = rounds?.encoder;
    if (!encoder || patched.has(encoder)) return;
    patched.add(encoder);
    const encode = encoder.encodeDense.bind(encoder);
    encoder.encodeDense = (p, codec, delta) => {
      for (let i = 0; i < delta.length; i++) {
        delta[i] = Math.max(-bound, Math.min(bound, factor * (delta[i] as number)));
      }
      return encode(p, codec, delta);
    };
  });
}

export const CONTRIBUTION_ATTACKS: Attack[] = [
  {
    name: 'contribution-100x',
    family: 'contribution',
    summary: 'a participant contributes 100·Δ every round',
    install: (context, hostile) => poisonContributions(context, hostile, (values) => values.map((v) => 100 * v)),
  },
  {
    name: 'contribution-100x-own-state',
    family: 'contribution',
    summary: 'a participant scales its own Δ ×100 before encoding (within the bound; signed, consistent)',
    install: (context, hostile) => scaleOwnDelta(context, hostile, 100),
  },
  {
    name: 'contribution-huge',
    family: 'contribution',
    summary: 'a participant contributes finite values up to 3e38, in one round',
    install(context, hostile) {
      // the first round it contributes to once the attack is on, every shard of it
      let target: string | null = null;
      poisonContributions(context, hostile, huge, (fragment, round) => {
        target ??= `${fragment}:${round}`;
        return target === `${fragment}:${round}`;
      });
    },
  },
  {
    name: 'contribution-minus-10x',
    family: 'contribution',
    summary: 'a participant contributes −10·Δ every round',
    install: (context, hostile) => poisonContributions(context, hostile, (values) => values.map((v) => -10 * v)),
  },
  {
    name: 'contribution-inflated-weight',
    family: 'contribution',
    summary: 'a participant claims 2⁴⁰ tokens behind each contribution (Δ itself honest)',
    install(context, hostile) {
      context.rewrite(hostile.peer, 'contribution', (_to, message) => ({ ...message, weight: 2 ** 40 }));
    },
  },
];

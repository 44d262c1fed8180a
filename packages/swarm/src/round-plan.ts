/**
 * What a round-open names (docs/design.md, "Rounds…", "The collective";
 * docs/hostile-volunteers.md): the participants, each shard's owner and checker, the cap on each
 * participant's weight and each one's step time. Pure: the coordinator sends what these return.
 */
import type { Codec } from '@shoal/diloco';
import { type PeerId, type RoundOpenMessage, type RunConfig, shardRanges } from '@shoal/protocol';
import { type MemberInfo, median } from './roster.ts';

/**
 * A worker this many times slower than the others would hold up every round it is named for. Up
 * to about 5× the slack between rounds absorbs it (slow-worker.test.ts: the others do not wait).
 */
export const SLOW_FACTOR = 10;

/**
 * Workers left out of rounds for their pace, with each one's reason: those whose speed, as their
 * heartbeats report it (tokens/s over their last step, its compute and the duty cycle's rest, not
 * the waits for rounds: those are the room's, not the worker's), is under 1/SLOW_FACTOR of the
 * median of the others'. Each merge waits for every participant's next step boundary, so such a
 * worker would stall the others at every round; left out, it trains on and follows the rounds as
 * a replica, and comes back once its pace does. Workers that have not reported a step yet are not
 * judged, and the fastest never is, so a round always has someone. A worker that claims more
 * speed than it has is named, and stalls a round no more than one that withholds its
 * contribution (missed rounds bench it).
 */
export function slowWorkers(workers: readonly MemberInfo[]): Map<PeerId, string> {
  const known = workers.filter((w) => Number.isFinite(w.tokensPerSecond) && w.tokensPerSecond > 0);
  const slow = new Map<PeerId, string>();
  for (const worker of known) {
    const others = known.filter((w) => w !== worker).map((w) => w.tokensPerSecond);
    if (others.length === 0) continue;
    const typical = median(others);
    if (worker.tokensPerSecond * SLOW_FACTOR >= typical) continue;
    const speed = (tokensPerSecond: number) => Math.round(tokensPerSecond).toLocaleString('en-US');
    slow.set(
      worker.peer,
      `too slow for rounds: ${speed(worker.tokensPerSecond)} tokens/s against ${speed(typical)} for the others ` +
        `(under 1/${SLOW_FACTOR}); it trains on and follows the rounds`,
    );
  }
  return slow;
}

/**
 * The participants of a round: synced workers that can all reach each other, greedily from their
 * heartbeats' channel lists, best connected first (ties by peer id), so a member that claims to
 * reach nobody leaves itself out, not the others. A worker that has not reported yet counts as
 * reachable. Returns them in peer-id order, and each worker's reason to be left out ('' if chosen).
 */
export function chooseParticipants(
  workers: readonly MemberInfo[],
  unreachableHint = '',
): { participants: PeerId[]; reasons: Map<PeerId, string> } {
  const chosen: MemberInfo[] = [];
  const reasons = new Map<PeerId, string>();
  const sees = (a: MemberInfo, b: MemberInfo) => a.reachable === null || a.reachable.has(b.peer);
  const degree = (w: MemberInfo) => workers.filter((o) => o !== w && sees(w, o) && sees(o, w)).length;
  const degrees = new Map(workers.map((w) => [w, degree(w)]));
  const order = [...workers].sort(
    (a, b) =>
      (degrees.get(b) as number) - (degrees.get(a) as number) || (a.peer < b.peer ? -1 : a.peer > b.peer ? 1 : 0),
  );
  for (const worker of order) {
    const blocked = chosen.filter((c) => !(sees(c, worker) && sees(worker, c)));
    const reason =
      blocked.length === 0 ? '' : `no channel to ${blocked.map((c) => c.peer).join(', ')}${unreachableHint}`;
    if (reason === '') chosen.push(worker);
    reasons.set(worker.peer, reason);
  }
  // round order is peer-id order, whatever order they were chosen in
  return { participants: chosen.map((w) => w.peer).sort(), reasons };
}

/**
 * The shard table: shard boundaries on the codec's block grid (so each shard's bytes are a slice
 * of one encoding of the fragment), owner k is participant k and its checker the next one. One
 * participant alone has nobody to check it: its result is its own Δ, bounded like any other.
 */
export function shardTable(fragmentSize: number, codec: Codec, participants: PeerId[]): RoundOpenMessage['shards'] {
  const n = participants.length;
  return shardRanges(fragmentSize, codec.blockSize, n).map((range, k) => ({
    ...range,
    owner: participants[k] as PeerId,
    ...(n >= 2 ? { checker: participants[(k + 1) % n] as PeerId } : {}),
  }));
}

/**
 * The most tokens `info` can honestly put behind its contribution to fragment p: the steps its
 * heartbeats showed since it was last named for p, plus H for the steps between this open and
 * its contribution and a heartbeat's lag. A weight claimed beyond it is capped. Notes the step.
 */
export function seenTokens(info: MemberInfo, p: number, config: RunConfig): number {
  const { train, diloco } = config;
  const steps = info.innerStep - (info.stepAtLastRound[p] ?? 0) + diloco.innerSteps;
  info.stepAtLastRound[p] = info.innerStep;
  return Math.max(1, steps * train.batchSize * train.seqLen);
}

/**
 * Each participant's time per inner step, ms: the step time its heartbeats claim (tokens per
 * second), but never more than this coordinator measured between its heartbeats (a member cannot
 * pass for slower than it is, to stretch everyone's merges); one that claimed nothing takes the
 * median of the others'. Undefined when none did.
 */
export function stepTimes(infos: MemberInfo[], config: RunConfig): number[] | undefined {
  const tokensPerStep = config.train.batchSize * config.train.seqLen;
  const claimed = infos.map(({ tokensPerSecond: t }) => (Number.isFinite(t) && t > 0 ? (tokensPerStep * 1000) / t : 0));
  const known = claimed.filter((ms) => ms > 0);
  if (known.length === 0) return undefined;
  const typical = median(known);
  return claimed.map((ms, i) => {
    const measured = (infos[i] as MemberInfo).measuredStepMs;
    const bounded = measured > 0 ? Math.min(ms || typical, measured) : ms || typical;
    return Math.min(3_600_000, Math.max(1e-3, bounded));
  });
}

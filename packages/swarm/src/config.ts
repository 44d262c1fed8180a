/**
 * What the protocol's state machines derive from a room's RunConfig: the bounds a contribution and
 * a round's payload are checked against.
 */
import type { RunConfig } from '@shoal/protocol';

export type DilocoSettings = RunConfig['diloco'];

/**
 * The largest |value| of an honest pseudo-gradient Δ = θ_global − θ_local, per coordinate: an
 * AdamW step moves a coordinate by at most about the learning rate (|m̂/√v̂| ≤ 1 but for rare
 * spikes), H steps by H·lr, and a contribution's weight (its steps) is capped at weightCapFactor
 * times the median's; a factor of 4 on top covers the spikes. Shard owners refuse a contribution
 * beyond it and replicas refuse an aggregate beyond it, before any outer step. A worker whose own
 * Δ would exceed half of it (it trained alone for long) scales its Δ down to that first.
 */
export function contributionBound(config: RunConfig): number {
  const { train, diloco } = config;
  return 4 * Math.max(train.maxLr, 1e-6) * diloco.innerSteps * diloco.weightCapFactor;
}

/**
 * The owners' per-value bound for a round's payload: contributionBound for a dense round; for a
 * low-rank one √(the model's longest tensor dimension) times it, since a factor's value is a row
 * or a column of Δ dotted with a unit vector. Replicas still check the decoded Δ̄ against
 * contributionBound before any outer step.
 */
export function payloadBound(config: RunConfig, lowRank: boolean): number {
  const bound = contributionBound(config);
  if (!lowRank) return bound;
  const { vocabSize, blockSize, nEmbd } = config.model;
  return bound * Math.sqrt(Math.max(vocabSize, blockSize, 4 * nEmbd));
}

/**
 * The host form's H from this browser's measured speed: the engine probe (engine-probe.ts) times
 * the chosen model here, and where a step is slow enough that the default H would keep the first
 * round away for more than about FIRST_ROUND_TARGET_S seconds, H is lowered so it comes sooner
 * (innerStepsFor). The default is never raised: a fast room keeps its rounds as far apart as the
 * default says, which is what its bandwidth wants. The host's browser stands in for the
 * volunteers' (they have not joined yet), so the form says it measured here.
 */
import { innerStepsFor } from '@shoal/room/host-defaults';
import { RUN_OPTION_DEFAULTS } from '@shoal/room/run-options';
import { useEffect, useState } from 'react';
import { type Engine, type EngineProbe, pickEngine, probeEngines } from '../runtime/engine-probe.ts';

export interface MeasuredInnerSteps {
  innerSteps: number;
  /** ms per step of the faster engine here, at the form's batch and sequence. */
  stepMs: number;
  engine: Engine;
}

/** H for a step measured by `probe` (the faster engine), or null when neither engine could train. */
export function measuredInnerSteps(
  probe: Pick<EngineProbe, 'cpu' | 'webgpu'>,
  tokensPerStep: number,
): MeasuredInnerSteps | null {
  const engine = pickEngine(probe);
  if (!engine) return null;
  const measure = engine === 'cpu' ? probe.cpu : probe.webgpu;
  const tokensPerSecond = measure.kind === 'unavailable' ? null : measure.tokensPerSecond;
  if (tokensPerSecond === null || !(tokensPerSecond > 0)) return null;
  const stepMs = (tokensPerStep * 1000) / tokensPerSecond;
  const fits = innerStepsFor({ stepMs });
  if (fits === null) return null;
  return { innerSteps: Math.min(RUN_OPTION_DEFAULTS.innerSteps, fits), stepMs, engine };
}

/** How long the probe waits for the form to settle before measuring (a person typing a batch). */
const SETTLE_MS = 800;

/**
 * Measures the form's model here while `enabled` (H not set by the link or by hand); re-measures
 * when the model, batch or sequence change (a kept result returns at once).
 */
export function useMeasuredInnerSteps(
  request: { preset: string; batch: number; seq: number },
  enabled: boolean,
): MeasuredInnerSteps | null {
  const [measured, setMeasured] = useState<MeasuredInnerSteps | null>(null);
  const { preset, batch, seq } = request;
  useEffect(() => {
    if (!enabled) return;
    const abort = new AbortController();
    const timer = setTimeout(() => {
      const gpuReason = 'gpu' in navigator ? null : 'this browser has no WebGPU';
      probeEngines({ preset, batch, seq }, { gpuReason, signal: abort.signal })
        .then((probe) => {
          if (!abort.signal.aborted) setMeasured(measuredInnerSteps(probe, batch * seq));
        })
        .catch(() => {}); // no measurement: the form keeps its H
    }, SETTLE_MS);
    return () => {
      clearTimeout(timer);
      abort.abort();
    };
  }, [preset, batch, seq, enabled]);
  return enabled ? measured : null;
}

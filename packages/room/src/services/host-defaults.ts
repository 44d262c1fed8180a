/**
 * How often a host evaluates θ_global and publishes the room view, per kind of host: the
 * dashboard's charts are watched live, so it evaluates every 5 s and publishes every second; a
 * headless host (`shoal host`'s `--eval-every-ms`, `--eval-batches`, `--publish-every-ms`,
 * `--metrics-every-ms`, `--deadline-ms`) writes a log and leaves its CPU to the room. A leaf
 * module, so the dashboard's main thread reads it without the services.
 */
const DEADLINE_MS = 30_000;

export const HOST_DEFAULTS = {
  cli: { evalEveryMs: 30_000, evalBatches: 4, publishEveryMs: 2_000, metricsEveryMs: 5_000, deadlineMs: DEADLINE_MS },
  dashboard: { evalEveryMs: 5_000, evalBatches: 4, publishEveryMs: 1_000, deadlineMs: DEADLINE_MS },
} as const;

export { FIRST_ROUND_TARGET_S, INNER_STEPS_RANGE, innerStepsFor } from '@shoal/swarm';

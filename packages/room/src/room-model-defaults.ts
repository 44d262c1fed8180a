/**
 * The room that `shoal simulate` and the planner (`shoal plan`, the host form's Recommend) model
 * when they are not told otherwise: how many volunteers, and each one's GPU, link and latency.
 * Defined once here. This is a leaf module, so the dashboard can import it without the simulator.
 */
export const ROOM_MODEL_DEFAULTS = {
  /** Volunteers: simulated workers, or the volunteers a plan expects. */
  workers: 4,
  /** Each volunteer's sustained fp32 training speed, TFLOP/s: one desktop card. */
  gpuTflops: 10,
  /** Each volunteer's uplink and downlink, Mbit/s: a home uplink is 5–50. */
  linkMbps: 10,
  /** One-way latency between volunteers, ms. */
  latencyMs: 50,
} as const;

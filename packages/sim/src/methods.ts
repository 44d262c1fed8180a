/** `shoal simulate`'s methods (simulate.ts says what each is); light, for the CLI's help. */
export const METHODS = [
  'dp',
  'diloco',
  'streaming',
  'streaming-fp4',
  'streaming-lowrank',
  'streaming-delay',
  'dilocox',
] as const;
export type MethodName = (typeof METHODS)[number];

/** A pipeline replica's link between its stage volunteers when none is given: a wired LAN. */
export const DEFAULT_STAGE_LINK = { stageLinkMbps: 1000, stageLatencyMs: 0.5 } as const;

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

import { type GptConfig, presetConfig } from '@shoal/model';

/** Bad input from the user: the CLI prints its message as one line and exits 1, no stack trace. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The preset's model config; an unknown name is a UsageError. */
export function presetOption(name: string): GptConfig {
  try {
    return presetConfig(name);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

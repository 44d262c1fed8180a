import { type AggregationRule, aggregationRuleOf, CODEC_NAMES, type CodecName, isCodecName } from '@shoal/diloco';
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

/** A codec name from --codec; an unknown one is a UsageError naming the choices. */
/** `--aggregation`: the rule by name, or a UsageError naming the choices. */
export function aggregationOption(name: string): AggregationRule {
  try {
    return aggregationRuleOf(name);
  } catch (error) {
    throw new UsageError(`--aggregation: ${(error as Error).message}`);
  }
}

export function codecOption(name: string): CodecName {
  if (!isCodecName(name)) throw new UsageError(`unknown codec ${name}: choose from ${CODEC_NAMES.join(', ')}`);
  return name;
}

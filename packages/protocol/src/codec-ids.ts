/**
 * The wire header's codec field: a stable number per codec. Never renumber; append.
 */
import type { CodecName } from '@shoal/diloco';

export const CODEC_IDS: Readonly<Record<CodecName, number>> = { fp32: 0, bf16: 1, int8: 2, int4: 3, fp4: 4 };

/** The codec named by a wire id, or undefined for an id this version does not know. */
export function codecNameOfId(id: number): CodecName | undefined {
  return (Object.keys(CODEC_IDS) as CodecName[]).find((name) => CODEC_IDS[name] === id);
}

/**
 * The codecs by name, for configuration and for the wire (which numbers them: @shoal/protocol's CODEC_IDS).
 * `createCodec('fp4', { blockSize: 128 })`; the float codecs ignore the block size.
 */
import { createFp4Codec, createInt4Codec, createInt8Codec, DEFAULT_BLOCK_SIZE } from './blockwise.ts';
import { CODEC_NAMES, type Codec, type CodecName } from './codec.ts';
import { createBf16Codec, createFp32Codec } from './float.ts';

export * from './blockwise.ts';
export * from './codec.ts';
export * from './error-feedback.ts';
export * from './float.ts';

export interface CodecOptions {
  /** Values per scale for int8, int4 and fp4 (even, 2 … 65536). Default 64. */
  blockSize?: number;
}

export function isCodecName(name: string): name is CodecName {
  return (CODEC_NAMES as readonly string[]).includes(name);
}

export function createCodec(name: string, options: CodecOptions = {}): Codec {
  const blockSize = options.blockSize ?? DEFAULT_BLOCK_SIZE;
  if (!isCodecName(name)) throw new RangeError(`Unknown codec "${name}": choose one of ${CODEC_NAMES.join(', ')}`);
  switch (name) {
    case 'fp32':
      return createFp32Codec();
    case 'bf16':
      return createBf16Codec();
    case 'int8':
      return createInt8Codec(blockSize);
    case 'int4':
      return createInt4Codec(blockSize);
    case 'fp4':
      return createFp4Codec(blockSize);
  }
}

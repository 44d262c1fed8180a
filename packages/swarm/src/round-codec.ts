/**
 * The codec a round-open names (its codec and block size), built once per round: a worker's
 * contribution, its shard duties and its replica all encode and decode that round with the same
 * instance, however many of them ask. Keyed by the message itself, so a round's codec goes
 * when its round-open does.
 */
import { type Codec, createCodec } from '@shoal/diloco';
import type { RoundOpenMessage } from '@shoal/protocol';

const built = new WeakMap<RoundOpenMessage, Codec>();

export function roundCodec(open: RoundOpenMessage): Codec {
  let codec = built.get(open);
  if (!codec) {
    codec = createCodec(open.codec, { blockSize: open.blockSize });
    built.set(open, codec);
  }
  return codec;
}

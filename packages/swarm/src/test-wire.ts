/** Reading and forging wire bytes in the swarm's tests (header layout: packages/protocol header.ts). */
import { HEADER_OFFSETS, MESSAGE_SPECS } from '@shoal/protocol';

/** The (fragment, round, shard) of a contribution's wire bytes, or null for any other kind. */
export function contributionOf(bytes: Uint8Array): { fragment: number; round: number; shard: number } | null {
  if (bytes[HEADER_OFFSETS.kind] !== MESSAGE_SPECS.contribution.id) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return {
    round: view.getUint32(HEADER_OFFSETS.round, true),
    fragment: view.getUint16(HEADER_OFFSETS.fragment, true),
    shard: view.getUint16(HEADER_OFFSETS.shard, true),
  };
}

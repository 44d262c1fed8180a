import { fnv1a32 } from '@shoal/data';

/**
 * The run id every member of a room derives from the room id (the wire header's run field):
 * FNV-1a of its UTF-8, never 0 (0 means "any run").
 */
export function runIdFor(roomId: string): number {
  return fnv1a32(new TextEncoder().encode(roomId)) || 1;
}

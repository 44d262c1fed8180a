/**
 * Control frames: what the mesh says to a peer's mesh on the same data channel, beside the chunks
 * of protocol's chunks.ts. They never reach the Transport's listeners.
 *
 * Layout (control format 1), little-endian, 8 bytes:
 *
 * | offset | bytes | field   | type | meaning                                   |
 * | ------ | ----- | ------- | ---- | ----------------------------------------- |
 * | 0      | 2     | magic   | u8×2 | ASCII "Sk" (53 6b); chunks start with "Sc" |
 * | 2      | 1     | version | u8   | CONTROL_VERSION (1)                       |
 * | 3      | 1     | kind    | u8   | 1 ping, 2 pong, 3 bye                     |
 * | 4      | 4     | nonce   | u32  | a ping's number, echoed by its pong       |
 */

export const CONTROL_BYTES = 8;
export const CONTROL_MAGIC = Uint8Array.of(0x53, 0x6b); // "Sk"
export const CONTROL_VERSION = 1;

export const CONTROL_KINDS = { ping: 1, pong: 2, bye: 3 } as const;
export type ControlKind = keyof typeof CONTROL_KINDS;

export interface ControlFrame {
  kind: ControlKind;
  nonce: number;
}

export function encodeControl(kind: ControlKind, nonce = 0): Uint8Array {
  const frame = new Uint8Array(CONTROL_BYTES);
  frame.set(CONTROL_MAGIC, 0);
  frame[2] = CONTROL_VERSION;
  frame[3] = CONTROL_KINDS[kind];
  new DataView(frame.buffer).setUint32(4, nonce >>> 0, true);
  return frame;
}

/** Whether the frame claims to be a control frame (its magic), whatever else it holds. */
export function isControlFrame(frame: Uint8Array): boolean {
  return frame.length >= 2 && frame[0] === CONTROL_MAGIC[0] && frame[1] === CONTROL_MAGIC[1];
}

/** The control frame, or null when the bytes are not a well-formed one. Never throws. */
export function decodeControl(frame: Uint8Array): ControlFrame | null {
  if (frame.length !== CONTROL_BYTES || !isControlFrame(frame) || frame[2] !== CONTROL_VERSION) return null;
  const kind = (Object.keys(CONTROL_KINDS) as ControlKind[]).find((name) => CONTROL_KINDS[name] === frame[3]);
  if (!kind) return null;
  const nonce = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(4, true);
  return { kind, nonce };
}

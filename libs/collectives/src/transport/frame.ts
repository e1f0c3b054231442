// Wire format of the data plane: a fixed 24-byte header, then the payload.
//   0 kind u8 | 1 opcode u8 | 2 dtype u8 | 3 reserved | 4 group u32 | 8 tag u32
//   12 root i32 | 16 count u32 | 20 payload length u32
// opcode/dtype/root/count form the op signature, so ranks that call different collectives are
// caught on the first message instead of corrupting each other's buffers.

export const HEADER_BYTES = 24;

export const enum FrameKind {
  Collective = 1,
  P2P = 2,
  /** An op-scoped abort: payload is JSON {failedRank, message, reason}. */
  Abort = 3,
  /** Sent by destroyProcessGroup: the peer leaves on purpose. */
  Bye = 4,
}

/** What every rank must agree on for one collective call. count = 0xffffffff: not compared. */
export interface OpSignature {
  opcode: number;
  dtype: number;
  root: number;
  count: number;
}

export const ANY_COUNT = 0xffffffff;
export const NO_SIGNATURE: OpSignature = { opcode: 0, dtype: 0, root: -1, count: ANY_COUNT };

export interface FrameHeader extends OpSignature {
  kind: FrameKind;
  group: number;
  tag: number;
  length: number;
}

export function writeHeader(out: Buffer, kind: FrameKind, group: number, tag: number, sig: OpSignature, length: number): Buffer {
  out[0] = kind;
  out[1] = sig.opcode;
  out[2] = sig.dtype;
  out[3] = 0;
  out.writeUInt32LE(group >>> 0, 4);
  out.writeUInt32LE(tag >>> 0, 8);
  out.writeInt32LE(sig.root, 12);
  out.writeUInt32LE(sig.count >>> 0, 16);
  out.writeUInt32LE(length >>> 0, 20);
  return out;
}

export function readHeader(b: Buffer): FrameHeader {
  return {
    kind: b[0] as FrameKind,
    opcode: b[1],
    dtype: b[2],
    group: b.readUInt32LE(4),
    tag: b.readUInt32LE(8),
    root: b.readInt32LE(12),
    count: b.readUInt32LE(16),
    length: b.readUInt32LE(20),
  };
}

export function signaturesMatch(a: OpSignature, b: OpSignature): boolean {
  return a.opcode === b.opcode && a.dtype === b.dtype && a.root === b.root && (a.count === ANY_COUNT || b.count === ANY_COUNT || a.count === b.count);
}

export function matchKey(kind: FrameKind, group: number, tag: number): string {
  return `${kind}:${group}:${tag >>> 0}`;
}

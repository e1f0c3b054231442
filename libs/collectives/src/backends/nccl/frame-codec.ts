// The sidecar's wire format, protocol 2 (native/nccl-sidecar/README.md, "Frame format"):
//   request: a fixed 128-byte little-endian header (magic "CMRQ", version, op, dtype, redOp,
//            collective, id, timeoutMs, payloadLength, then the op's numeric fields) + payload
//   reply:   a 32-byte header (magic "CMRP", version, op, status, id, bodyLength, payloadLength)
//            + body (ok: the result as a JSON object; error: the message) + payload
// Every request field is a number or an enum, so the sidecar reads integers at fixed offsets and
// never parses text; replies stay JSON where they are nested (hello) and are checked with zod.
import type { NcclCollective, SidecarDType, SidecarRedOp } from './protocol';

export const SIDECAR_WIRE_VERSION = 2;
export const REQUEST_MAGIC = 0x51524d43; // "CMRQ"
export const REPLY_MAGIC = 0x50524d43; // "CMRP"
export const REQUEST_HEADER_BYTES = 128;
export const REPLY_HEADER_BYTES = 32;
/** memset's count meaning "to the end of the buffer". */
export const COUNT_TO_END = 0xffff_ffff_ffff_ffffn;
/** A peer field that is not set. */
export const NO_PEER = -1;

export const SIDECAR_OPS = {
  hello: 1,
  ping: 2,
  shutdown: 3,
  getUniqueId: 4,
  commInitRank: 5,
  alloc: 6,
  free: 7,
  memset: 8,
  copyIn: 9,
  copyOut: 10,
  collective: 11,
  asyncError: 12,
  abort: 13,
  destroy: 14,
} as const;
export type SidecarOp = keyof typeof SIDECAR_OPS;

/** Error codes on the wire, by number (0 = ok). */
export const SIDECAR_ERROR_NAMES = [
  'OK',
  'BAD_FRAME',
  'UNKNOWN_OP',
  'INVALID_ARGUMENT',
  'UNAVAILABLE',
  'NOT_FOUND',
  'TIMEOUT',
  'ABORTED',
  'CUDA_ERROR',
  'NCCL_ERROR',
  'INTERNAL',
] as const;

/** dtype codes are ncclDataType_t's values. */
export const DTYPE_CODES: Record<SidecarDType, number> = {
  int8: 0,
  uint8: 1,
  int32: 2,
  uint32: 3,
  int64: 4,
  uint64: 5,
  float16: 6,
  float32: 7,
  float64: 8,
  bfloat16: 9,
};
/** redOp codes are ncclRedOp_t's values. */
export const RED_OP_CODES: Record<SidecarRedOp, number> = { sum: 0, product: 1, max: 2, min: 3, avg: 4 };
export const COLLECTIVE_CODES: Record<NcclCollective, number> = {
  allReduce: 0,
  broadcast: 1,
  reduce: 2,
  allGather: 3,
  reduceScatter: 4,
  sendRecv: 5,
  send: 6,
  recv: 7,
  gather: 8,
  scatter: 9,
  allToAll: 10,
};

/** The numeric fields a request may carry; an op reads only its own (README "Ops"). Absent = 0. */
export interface RequestFields {
  comm?: number;
  buf?: number;
  /** Elements of `dtype` (buffer ops: bytes with the default dtype uint8); COUNT_TO_END for memset. */
  count?: number | bigint;
  /** Buffer ops: the offset; collective: sendOffset (bytes). */
  offset?: number;
  recvOffset?: number;
  sendBuf?: number;
  recvBuf?: number;
  nranks?: number;
  rank?: number;
  device?: number;
  root?: number;
  /** NO_PEER (-1) when absent. */
  sendPeer?: number;
  recvPeer?: number;
  warmup?: number;
  iters?: number;
  value?: number;
  delayMs?: number;
  /** Default uint8. */
  dtype?: SidecarDType;
  redOp?: SidecarRedOp;
  collective?: NcclCollective;
}

export interface RequestHeader extends RequestFields {
  id: number;
  /** An op name, or a raw op code (tests send unknown ones). */
  op: SidecarOp | number;
  /** 0 or absent: the sidecar's default. */
  timeoutMs?: number;
}

/** A field that does not fit its slot in the header (the request is not sent). */
export class FrameEncodeError extends RangeError {}

function checkInt(name: string, v: number | bigint, min: bigint, max: bigint): bigint {
  if (typeof v === 'number' && !Number.isSafeInteger(v)) {
    throw new FrameEncodeError(`field '${name}' must be an integer, got ${v}`);
  }
  const b = BigInt(v);
  if (b < min || b > max) throw new FrameEncodeError(`field '${name}' = ${v} does not fit [${min}, ${max}]`);
  return b;
}

const U8 = 0xffn;
const U16 = 0xffffn;
const U32 = 0xffff_ffffn;
const U64 = 0xffff_ffff_ffff_ffffn;

/** One request frame as bytes: the 128-byte header, then the payload. */
export function encodeRequest(header: RequestHeader, payload?: Uint8Array): Buffer {
  const payloadLength = payload?.byteLength ?? 0;
  const b = Buffer.alloc(REQUEST_HEADER_BYTES);
  const u8 = (off: number, name: string, v: number) => b.writeUInt8(Number(checkInt(name, v, 0n, U8)), off);
  const u16 = (off: number, name: string, v: number) => b.writeUInt16LE(Number(checkInt(name, v, 0n, U16)), off);
  const u32 = (off: number, name: string, v: number) => b.writeUInt32LE(Number(checkInt(name, v, 0n, U32)), off);
  const i32 = (off: number, name: string, v: number) => b.writeInt32LE(Number(checkInt(name, v, -0x8000_0000n, 0x7fff_ffffn)), off);
  const u64 = (off: number, name: string, v: number | bigint) => b.writeBigUInt64LE(checkInt(name, v, 0n, U64), off);
  const f = header;
  const op = typeof f.op === 'number' ? f.op : SIDECAR_OPS[f.op];
  b.writeUInt32LE(REQUEST_MAGIC, 0);
  b.writeUInt16LE(SIDECAR_WIRE_VERSION, 4);
  b.writeUInt16LE(REQUEST_HEADER_BYTES, 6);
  u16(8, 'op', op);
  u8(10, 'dtype', f.dtype === undefined ? DTYPE_CODES.uint8 : DTYPE_CODES[f.dtype]);
  u8(11, 'redOp', f.redOp === undefined ? RED_OP_CODES.sum : RED_OP_CODES[f.redOp]);
  u8(12, 'collective', f.collective === undefined ? 0 : COLLECTIVE_CODES[f.collective]);
  u64(16, 'id', f.id);
  u32(24, 'timeoutMs', f.timeoutMs ?? 0);
  u32(28, 'payloadLength', payloadLength);
  u64(32, 'comm', f.comm ?? 0);
  u64(40, 'buf', f.buf ?? 0);
  u64(48, 'count', f.count ?? 0);
  u64(56, 'offset', f.offset ?? 0);
  u64(64, 'recvOffset', f.recvOffset ?? 0);
  u64(72, 'sendBuf', f.sendBuf ?? 0);
  u64(80, 'recvBuf', f.recvBuf ?? 0);
  u32(88, 'nranks', f.nranks ?? 0);
  u32(92, 'rank', f.rank ?? 0);
  u32(96, 'device', f.device ?? 0);
  u32(100, 'root', f.root ?? 0);
  i32(104, 'sendPeer', f.sendPeer ?? NO_PEER);
  i32(108, 'recvPeer', f.recvPeer ?? NO_PEER);
  u32(112, 'warmup', f.warmup ?? 0);
  u32(116, 'iters', f.iters ?? 0);
  u32(120, 'value', f.value ?? 0);
  u32(124, 'delayMs', f.delayMs ?? 0);
  return payloadLength ? Buffer.concat([b, Buffer.from(payload!.buffer, payload!.byteOffset, payload!.byteLength)]) : b;
}

/** One reply from the sidecar. */
export interface Frame {
  /** The request's id; null when the sidecar could not read it (then it answers the oldest request). */
  id: number | null;
  /** The request's op (null when unknown or unreadable). */
  op: SidecarOp | null;
  ok: boolean;
  /** Ok replies: the result fields. */
  result: Record<string, unknown>;
  /** Error replies: the code's name (BAD_FRAME, TIMEOUT, …) and the message. */
  error?: { code: string; message: string };
  payload: Buffer;
}

export class FrameDecodeError extends Error {}

const OP_NAMES = new Map<number, SidecarOp>((Object.entries(SIDECAR_OPS) as Array<[SidecarOp, number]>).map(([name, code]) => [code, name]));

/**
 * Reassembles reply frames from stream chunks. Holds chunks until a whole frame is there, so a
 * large payload is copied once.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(private readonly maxFrameBytes = 0xffffffff) {}

  /** Adds a chunk and returns every frame now complete. Throws FrameDecodeError on a bad frame. */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < REPLY_HEADER_BYTES) break;
      const head = this.peek(REPLY_HEADER_BYTES);
      if (head.readUInt32LE(0) !== REPLY_MAGIC) {
        throw new FrameDecodeError(`bad reply magic 0x${head.readUInt32LE(0).toString(16)}`);
      }
      const version = head.readUInt16LE(4);
      const headerLength = head.readUInt16LE(6);
      if (version !== SIDECAR_WIRE_VERSION || headerLength !== REPLY_HEADER_BYTES) {
        throw new FrameDecodeError(`reply is protocol ${version} with a ${headerLength}-byte header; this client speaks ${SIDECAR_WIRE_VERSION}`);
      }
      const bodyLength = head.readUInt32LE(24);
      const payloadLength = head.readUInt32LE(28);
      const total = REPLY_HEADER_BYTES + bodyLength + payloadLength;
      if (total > this.maxFrameBytes) {
        throw new FrameDecodeError(`reply of ${total} bytes exceeds the limit of ${this.maxFrameBytes}`);
      }
      if (this.buffered < total) break;
      const whole = this.take(total);
      frames.push(decodeReply(whole, bodyLength));
    }
    return frames;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0].length >= n) return this.chunks[0];
    return Buffer.concat(this.chunks).subarray(0, n);
  }

  private take(n: number): Buffer {
    let out: Buffer;
    if (this.chunks[0].length >= n) {
      out = this.chunks[0].subarray(0, n);
      this.chunks[0] = this.chunks[0].subarray(n);
      if (this.chunks[0].length === 0) this.chunks.shift();
    } else {
      const all = Buffer.concat(this.chunks);
      out = all.subarray(0, n);
      this.chunks = all.length > n ? [all.subarray(n)] : [];
    }
    this.buffered -= n;
    return out;
  }
}

function decodeReply(whole: Buffer, bodyLength: number): Frame {
  const opCode = whole.readUInt16LE(8);
  const status = whole.readUInt16LE(10);
  const idKnown = (whole.readUInt32LE(12) & 1) !== 0;
  const id = idKnown ? Number(whole.readBigUInt64LE(16)) : null;
  const body = whole.subarray(REPLY_HEADER_BYTES, REPLY_HEADER_BYTES + bodyLength);
  const payload = whole.subarray(REPLY_HEADER_BYTES + bodyLength);
  const op = OP_NAMES.get(opCode) ?? null;
  if (status !== 0) {
    const code = SIDECAR_ERROR_NAMES[status] ?? 'INTERNAL';
    return { id, op, ok: false, result: {}, error: { code, message: body.toString('utf8') }, payload };
  }
  let result: unknown = {};
  if (bodyLength > 0) {
    try {
      result = JSON.parse(body.toString('utf8'));
    } catch (e) {
      throw new FrameDecodeError(`reply result is not JSON: ${(e as Error).message}`);
    }
  }
  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw new FrameDecodeError('reply result is not a JSON object');
  }
  return { id, op, ok: true, result: result as Record<string, unknown>, payload };
}

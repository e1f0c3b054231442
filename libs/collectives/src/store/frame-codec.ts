// The TcpStore wire format: compact binary frames, pipelined (requests carry an id, replies echo it).
//   frame  = u32 bodyLength | u8 tag | u32 id | u16 fieldCount | field*
//   field  = u32 length | bytes
// A request's tag is its command; a reply's tag is OK or ERROR. Keys are UTF-8 fields, counters
// signed 64-bit little-endian fields, flags one byte.

export const Cmd = {
  SET: 1,
  GET: 2,
  ADD: 3,
  COMPARE_SET: 4,
  WAIT: 5,
  CHECK: 6,
  DELETE: 7,
  NUM_KEYS: 8,
} as const;

export const REPLY_OK = 0x80;
export const REPLY_ERROR = 0x81;

/** Frames larger than this are refused (a corrupt length must not make us buffer gigabytes). */
export const MAX_FRAME_BYTES = 1 << 30;

export interface Frame {
  tag: number;
  id: number;
  fields: Buffer[];
}

export function encodeFrame(tag: number, id: number, fields: readonly Uint8Array[] = []): Buffer {
  let size = 4 + 1 + 4 + 2;
  for (const f of fields) size += 4 + f.byteLength;
  const out = Buffer.allocUnsafe(size);
  out.writeUInt32LE(size - 4, 0);
  out.writeUInt8(tag, 4);
  out.writeUInt32LE(id >>> 0, 5);
  out.writeUInt16LE(fields.length, 9);
  let at = 11;
  for (const f of fields) {
    out.writeUInt32LE(f.byteLength, at);
    out.set(f, at + 4);
    at += 4 + f.byteLength;
  }
  return out;
}

export const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

export function i64(n: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64LE(BigInt(n));
  return b;
}

export function readI64(b: Buffer): number {
  return Number(b.readBigInt64LE(0));
}

export const flag = (v: boolean): Buffer => Buffer.from([v ? 1 : 0]);

/** Accumulates socket chunks and yields complete frames; throws on a malformed frame. */
export class FrameDecoder {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const frames: Frame[] = [];
    while (this.pending.length >= 4) {
      const len = this.pending.readUInt32LE(0);
      if (len < 7 || len > MAX_FRAME_BYTES) throw new Error(`malformed store frame (length ${len})`);
      if (this.pending.length < 4 + len) break;
      const body = this.pending.subarray(4, 4 + len);
      const tag = body.readUInt8(0);
      const id = body.readUInt32LE(1);
      const count = body.readUInt16LE(5);
      const fields: Buffer[] = [];
      let at = 7;
      for (let i = 0; i < count; i++) {
        if (at + 4 > body.length) throw new Error('malformed store frame (truncated field)');
        const flen = body.readUInt32LE(at);
        if (at + 4 + flen > body.length) throw new Error('malformed store frame (field overruns frame)');
        fields.push(Buffer.from(body.subarray(at + 4, at + 4 + flen))); // own copy: the chunk is reused
        at += 4 + flen;
      }
      frames.push({ tag, id, fields });
      this.pending = this.pending.subarray(4 + len);
    }
    return frames;
  }
}

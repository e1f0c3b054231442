// The TcpStore wire format: compact binary frames, pipelined (requests carry an id, replies echo it).
//   frame  = u32 bodyLength | u8 tag | u32 id | u16 fieldCount | field*
//   field  = u32 length | bytes
// A request's tag is its command; a reply's tag is OK or ERROR. Keys are UTF-8 fields, counters
// signed 64-bit little-endian fields, flags one byte. An ERROR reply's second field, when present,
// is its kind: LIMIT_ERROR for a request refused by one of the server's limits (nothing changed).
// SET_QUIET is SET answered only when it fails (torch's set sends no answer at all): a client
// learns of its success from the answer to any later request, which the server runs after it.
// Tags are only ever added, so a client and a server of different versions agree on the old ones.

export const Cmd = {
  SET: 1,
  GET: 2,
  ADD: 3,
  COMPARE_SET: 4,
  WAIT: 5,
  CHECK: 6,
  DELETE: 7,
  NUM_KEYS: 8,
  SET_QUIET: 9,
} as const;

export const REPLY_OK = 0x80;
export const REPLY_ERROR = 0x81;

/** Frames larger than this are refused (a corrupt length must not make us buffer gigabytes). */
export const MAX_FRAME_BYTES = 1 << 30;

/** The kind field of an ERROR reply refused by a limit of the server (TcpStoreLimits). */
export const LIMIT_ERROR = 'LIMIT';
/** The request id of an ERROR frame that refuses the connection itself (ids start at 1). */
const CONNECTION_ID = 0;

export interface Frame {
  tag: number;
  id: number;
  fields: Buffer[];
  /** set when the frame was over the decoder's limit: its length; its body was skipped unread */
  oversize?: number;
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

/**
 * A frame that cannot be parsed; `id` is its request id when the header was readable, `frames`
 * the complete frames that came before it in the same push.
 */
export class MalformedFrameError extends Error {
  frames: Frame[] = [];
  constructor(
    message: string,
    readonly id?: number,
  ) {
    super(`malformed store frame (${message})`);
    this.name = 'MalformedFrameError';
  }
}

/**
 * Accumulates socket chunks and yields complete frames; throws MalformedFrameError on a malformed
 * frame. Chunks are kept in a list until a whole frame is there, so a large frame arriving in
 * many pieces is copied once, not once per piece.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** bytes of an oversize frame still to drop as they arrive */
  private skipping = 0;

  /**
   * `maxFrameBytes`: longer frames are malformed (the stream is given up), unless `skipOversize`:
   * then such a frame comes out with `oversize` set and no fields, and its body is dropped as it
   * arrives, never buffered, so the connection can go on.
   */
  constructor(
    private readonly maxFrameBytes = MAX_FRAME_BYTES,
    private readonly skipOversize = false,
  ) {}

  /**
   * `borrowed`: the caller reuses `chunk`'s memory after this returns (a socket's onread buffer):
   * the part of it not yet framed is copied. Fields of the frames returned are always copies.
   */
  push(chunk: Buffer, borrowed = false): Frame[] {
    if (chunk.length) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const frames: Frame[] = [];
    try {
      this.parse(frames);
    } catch (e) {
      if (e instanceof MalformedFrameError) e.frames = frames;
      throw e;
    }
    // only the last piece can still be in the caller's memory: earlier ones were owned or copied
    const last = this.chunks.length - 1;
    if (borrowed && last >= 0 && this.chunks[last].buffer === chunk.buffer) this.chunks[last] = Buffer.from(this.chunks[last]);
    return frames;
  }

  private parse(frames: Frame[]): void {
    for (;;) {
      if (this.skipping) {
        const n = Math.min(this.skipping, this.buffered);
        this.drop(n);
        this.skipping -= n;
        if (this.skipping) break;
      }
      if (this.buffered < 4) break;
      const head = this.peek(Math.min(this.buffered, 11));
      const len = head.readUInt32LE(0);
      const id = head.length >= 9 ? head.readUInt32LE(5) : undefined;
      if (len < 7) throw new MalformedFrameError(`length ${len} is shorter than a header`, id);
      if (len > this.maxFrameBytes) {
        if (!this.skipOversize) throw new MalformedFrameError(`length ${len} is over the limit of ${this.maxFrameBytes} bytes`, id);
        if (id === undefined) break; // its id has not arrived yet
        frames.push({ tag: head.readUInt8(4), id, fields: [], oversize: len });
        this.skipping = 4 + len;
        continue;
      }
      if (this.buffered < 4 + len) break;
      const body = this.take(4 + len).subarray(4);
      frames.push(parseBody(body));
    }
  }

  /** The first n buffered bytes (n <= buffered), joining chunks only when the first is shorter. */
  private peek(n: number): Buffer {
    if (this.chunks[0].length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0].subarray(0, n);
  }

  /** Drops the first n buffered bytes (n <= buffered) without joining chunks. */
  private drop(n: number): void {
    this.buffered -= n;
    while (n > 0) {
      const first = this.chunks[0];
      if (first.length <= n) {
        this.chunks.shift();
        n -= first.length;
      } else {
        this.chunks[0] = first.subarray(n);
        n = 0;
      }
    }
  }

  /** Removes and returns the first n buffered bytes. */
  private take(n: number): Buffer {
    if (this.chunks[0].length < n) this.chunks = [Buffer.concat(this.chunks)];
    const first = this.chunks[0];
    const out = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return out;
  }
}

/** An ERROR frame refusing a connection: what the server sends instead of serving it. */
export function connectionRefusalFrame(message: string): Buffer {
  return encodeFrame(REPLY_ERROR, CONNECTION_ID, [Buffer.from(message, 'utf8'), Buffer.from(LIMIT_ERROR)]);
}

/** The message of a connection refusal at the start of `chunk`, or undefined when it is none. */
export function readConnectionRefusal(chunk: Buffer): string | undefined {
  if (chunk.length < 11 || chunk.readUInt8(4) !== REPLY_ERROR || chunk.readUInt32LE(5) !== CONNECTION_ID) return undefined;
  const len = chunk.readUInt32LE(0);
  if (len > chunk.length - 4 || len > 64 * 1024) return undefined;
  try {
    return parseBody(chunk.subarray(4, 4 + len)).fields[0]?.toString('utf8');
  } catch {
    return undefined;
  }
}

function parseBody(body: Buffer): Frame {
  const tag = body.readUInt8(0);
  const id = body.readUInt32LE(1);
  const count = body.readUInt16LE(5);
  const fields: Buffer[] = [];
  let at = 7;
  for (let i = 0; i < count; i++) {
    if (at + 4 > body.length) throw new MalformedFrameError(`field ${i} of ${count} is truncated`, id);
    const flen = body.readUInt32LE(at);
    if (at + 4 + flen > body.length) throw new MalformedFrameError(`field ${i} of ${flen} bytes overruns the frame`, id);
    fields.push(Buffer.from(body.subarray(at + 4, at + 4 + flen))); // own copy: the chunk is reused
    at += 4 + flen;
  }
  if (at !== body.length) throw new MalformedFrameError(`${body.length - at} bytes after the last field`, id);
  return { tag, id, fields };
}

// The sidecar's wire format (native/nccl-sidecar/README.md, "Frame format"):
//   u32 LE frameLength = 4 + headerLength + payloadLength | u32 LE headerLength | JSON header | payload

export interface Frame {
  header: Record<string, unknown>;
  payload: Buffer;
}

/** One frame as bytes. */
export function encodeFrame(header: object, payload?: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const payloadLength = payload?.byteLength ?? 0;
  const prefix = Buffer.allocUnsafe(8);
  prefix.writeUInt32LE(4 + json.length + payloadLength, 0);
  prefix.writeUInt32LE(json.length, 4);
  return payloadLength
    ? Buffer.concat([prefix, json, Buffer.from(payload!.buffer, payload!.byteOffset, payload!.byteLength)])
    : Buffer.concat([prefix, json]);
}

export class FrameDecodeError extends Error {}

/**
 * Reassembles frames from stream chunks. Holds chunks until a whole frame is there, so a large
 * payload is copied once.
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
      if (this.buffered < 8) break;
      const head = this.peek(8);
      const frameLength = head.readUInt32LE(0);
      const headerLength = head.readUInt32LE(4);
      if (frameLength < 4 || frameLength > this.maxFrameBytes) {
        throw new FrameDecodeError(`frameLength ${frameLength} is outside [4, ${this.maxFrameBytes}]`);
      }
      if (headerLength > frameLength - 4) {
        throw new FrameDecodeError(`headerLength ${headerLength} exceeds frameLength - 4 = ${frameLength - 4}`);
      }
      if (this.buffered < 4 + frameLength) break;
      const whole = this.take(4 + frameLength);
      let header: unknown;
      try {
        header = JSON.parse(whole.toString('utf8', 8, 8 + headerLength));
      } catch (e) {
        throw new FrameDecodeError(`frame header is not JSON: ${(e as Error).message}`);
      }
      if (typeof header !== 'object' || header === null || Array.isArray(header)) {
        throw new FrameDecodeError('frame header is not a JSON object');
      }
      frames.push({ header: header as Record<string, unknown>, payload: whole.subarray(8 + headerLength) });
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

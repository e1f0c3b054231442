// An op's (or a result's) data on NATS: the bytes in messages no larger than the server's
// max_payload, each with the op's number and the chunk's offset in headers, so the receiver puts
// each chunk in place whatever the order. Shared by the client and the agents' service workers.
import { headers, Msg, NatsConnection } from 'nats';
import { SVC_HEADERS } from '@cmesh/protocol';

/** Room left in each message for its headers. */
const HEADER_ROOM = 1024;

/** The largest chunk this connection's server accepts (its max_payload less room for headers). */
export function chunkBytes(nc: NatsConnection): number {
  const max = nc.info?.max_payload ?? 1024 * 1024;
  return Math.max(1024, max - HEADER_ROOM);
}

/** Publishes `data` on `subject` in chunks of at most chunkBytes(nc). */
export function publishChunks(nc: NatsConnection, subject: string, seq: number, data: Uint8Array): void {
  const step = chunkBytes(nc);
  for (let off = 0; off < data.byteLength; off += step) {
    const h = headers();
    h.set(SVC_HEADERS.seq, String(seq));
    h.set(SVC_HEADERS.offset, String(off));
    nc.publish(subject, data.subarray(off, Math.min(off + step, data.byteLength)), { headers: h });
  }
}

/** A data chunk's op number and offset, or null when the message is not a chunk (a JSON header). */
export function chunkOf(m: Msg): { seq: number; offset: number } | null {
  const seq = m.headers?.get(SVC_HEADERS.seq);
  const offset = m.headers?.get(SVC_HEADERS.offset);
  if (!seq || offset === undefined || offset === '') return null;
  const s = Number(seq);
  const o = Number(offset);
  return Number.isSafeInteger(s) && s > 0 && Number.isSafeInteger(o) && o >= 0 ? { seq: s, offset: o } : null;
}

/** Collects one message's bytes; complete when every byte arrived. */
export class Assembly {
  readonly data: Uint8Array;
  private received = 0;

  /** `filled`: the bytes are all here already (the local path's shared segment) */
  constructor(
    readonly bytes: number,
    filled?: Uint8Array,
  ) {
    this.data = filled ?? new Uint8Array(bytes);
    if (filled) this.received = bytes;
  }

  /** Puts a chunk in place; an error message when it does not fit (the message is then broken). */
  add(offset: number, chunk: Uint8Array): string | null {
    if (offset + chunk.byteLength > this.bytes) return `chunk at ${offset} of ${chunk.byteLength} bytes overruns the ${this.bytes} announced`;
    this.data.set(chunk, offset);
    this.received += chunk.byteLength;
    return null;
  }

  get complete(): boolean {
    return this.received >= this.bytes;
  }
}

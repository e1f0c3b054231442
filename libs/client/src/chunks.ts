// An op's (or a result's) data on NATS: the bytes in messages no larger than the server's
// max_payload, each with the op's number and the chunk's offset in headers, so the receiver puts
// each chunk in place whatever the order (GroupChannel.chunks publishes them under the group's
// MAC). Shared by the client and the agents' member workers.
import type { Msg } from '@nats-io/nats-core';
import { SERVICE_GROUP_HEADERS } from '@cmesh/protocol';

/** A data chunk's op number and offset, or null when the message is not a chunk (a JSON header). */
export function chunkOf(m: Pick<Msg, 'headers'>): { seq: number; offset: number } | null {
  const seq = m.headers?.get(SERVICE_GROUP_HEADERS.seq);
  const offset = m.headers?.get(SERVICE_GROUP_HEADERS.offset);
  if (!seq || offset === undefined || offset === '') return null;
  const s = Number(seq);
  const o = Number(offset);
  return Number.isSafeInteger(s) && s > 0 && Number.isSafeInteger(o) && o >= 0 ? { seq: s, offset: o } : null;
}

/** Collects one message's bytes; complete when every byte arrived. */
export class Assembly {
  readonly data: Uint8Array;
  private received = 0;
  /** offsets already placed: a chunk seen again (a replay) changes nothing */
  private readonly offsets = new Set<number>();

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
    if (this.offsets.has(offset) || this.complete) return null;
    this.offsets.add(offset);
    this.data.set(chunk, offset);
    this.received += chunk.byteLength;
    return null;
  }

  get complete(): boolean {
    return this.received >= this.bytes;
  }
}

/**
 * Chunks that came before the header that announces their op (NATS keeps one publisher's order, so
 * only a reordering path or a hostile sender does this): kept by op, at most `maxOps` ops and
 * `maxBytes` bytes in all; beyond that a chunk is refused (the caller drops and counts it).
 */
export class EarlyChunks {
  private readonly byOp = new Map<number, { offset: number; data: Uint8Array }[]>();
  private bytes = 0;

  constructor(
    private readonly maxOps: number,
    private readonly maxBytes: number,
  ) {}

  /** Keeps a copy of the chunk; false when that would pass a limit. */
  add(seq: number, offset: number, data: Uint8Array): boolean {
    const list = this.byOp.get(seq);
    if (!list && this.byOp.size >= this.maxOps) return false;
    if (this.bytes + data.byteLength > this.maxBytes) return false;
    this.bytes += data.byteLength;
    if (list) list.push({ offset, data: data.slice() });
    else this.byOp.set(seq, [{ offset, data: data.slice() }]);
    return true;
  }

  /** The op's chunks, forgotten here. */
  take(seq: number): { offset: number; data: Uint8Array }[] {
    const list = this.byOp.get(seq) ?? [];
    this.byOp.delete(seq);
    for (const c of list) this.bytes -= c.data.byteLength;
    return list;
  }

  /** Forgets the chunks of ops before `seq` (they ran, or will never be announced). */
  dropBefore(seq: number): void {
    for (const s of [...this.byOp.keys()]) if (s < seq) this.take(s);
  }

  get size(): { ops: number; bytes: number } {
    return { ops: this.byOp.size, bytes: this.bytes };
  }
}

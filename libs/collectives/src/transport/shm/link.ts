// One peer on this host, over two single-producer single-consumer byte rings: the outbound ring
// lives in the peer's segment, the inbound one in ours. Frames are the TCP data plane's (header,
// then payload), so the peer connection's parser, matching, mismatch detection and control frames
// work unchanged: the inbound bytes are fed to it straight from shared memory (one copy, into the
// posted receive's buffer), and the outbound ones are copied into the ring (one copy). A message
// larger than the free space goes in pieces as the consumer frees space (pipelined).
import type { ByteLink } from '../peer-connection';
import { SLOT_CTRL_BYTES, S_HEAD, S_TAIL, S_WAITING, slotOffset } from './layout';
import type { Segment } from './segment';

/** The consumer frees space in pieces this large, so a producer waiting for space can go on. */
const READ_PIECE_FRACTION = 4;

interface PendingWrite {
  parts: Uint8Array[];
  part: number;
  off: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

class Ring {
  readonly head: number;
  readonly tail: number;
  readonly waiting: number;
  readonly data: Buffer;
  readonly mask: number;

  constructor(
    readonly seg: Segment,
    slot: number,
    readonly size: number,
  ) {
    const base = slotOffset(slot, size);
    this.head = (base + S_HEAD) >> 2;
    this.tail = (base + S_TAIL) >> 2;
    this.waiting = (base + S_WAITING) >> 2;
    this.data = seg.bytes.subarray(base + SLOT_CTRL_BYTES, base + SLOT_CTRL_BYTES + size);
    this.mask = size - 1;
  }
}

export class ShmLink implements ByteLink {
  private readonly out: Ring;
  private readonly in: Ring;
  private readonly queue: PendingWrite[] = [];
  private readonly piece: number;
  private failed?: Error;
  /** Where the inbound bytes go: the peer connection's frame parser. */
  private sink?: (chunk: Buffer) => void;

  constructor(
    readonly peer: number,
    /** this rank's segment (inbound ring) and the slot the peer writes to */
    mine: Segment,
    inSlot: number,
    inRing: number,
    /** the peer's segment (outbound ring) and the slot this rank writes to */
    theirs: Segment,
    outSlot: number,
    outRing: number,
  ) {
    this.in = new Ring(mine, inSlot, inRing);
    this.out = new Ring(theirs, outSlot, outRing);
    this.piece = Math.max(4096, inRing / READ_PIECE_FRACTION);
  }

  attach(sink: (chunk: Buffer) => void): void {
    this.sink = sink;
  }

  write(header: Uint8Array, data: Uint8Array): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    const parts = data.byteLength ? [header, data] : [header];
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ parts, part: 0, off: 0, resolve, reject });
      if (this.queue.length === 1) this.flush();
    });
  }

  /** Copies queued writes into the outbound ring as far as it has room. */
  flush(): void {
    const r = this.out;
    const i32 = r.seg.i32;
    let wrote = false;
    let head = Atomics.load(i32, r.head);
    while (this.queue.length) {
      const w = this.queue[0];
      const buf = w.parts[w.part];
      let free = r.size - ((head - Atomics.load(i32, r.tail)) >>> 0);
      if (free === 0) {
        // Dekker with the consumer: it stores the tail, then reads the flag
        Atomics.store(i32, r.waiting, 1);
        free = r.size - ((head - Atomics.load(i32, r.tail)) >>> 0);
        if (free === 0) break;
        Atomics.store(i32, r.waiting, 0);
      }
      const pos = head & r.mask;
      const n = Math.min(free, buf.byteLength - w.off, r.size - pos);
      r.data.set(n === buf.byteLength && w.off === 0 ? buf : buf.subarray(w.off, w.off + n), pos);
      head = (head + n) | 0;
      Atomics.store(i32, r.head, head);
      wrote = true;
      w.off += n;
      if (w.off === buf.byteLength) {
        w.off = 0;
        if (++w.part === w.parts.length) {
          this.queue.shift();
          w.resolve();
        }
      }
    }
    if (wrote) r.seg.ring();
  }

  /** Feeds whatever the peer has written to the frame parser; frees the space as it goes. */
  poll(): void {
    const r = this.in;
    const i32 = r.seg.i32;
    let tail = Atomics.load(i32, r.tail);
    for (;;) {
      const used = (Atomics.load(i32, r.head) - tail) >>> 0;
      if (used === 0 || !this.sink) return;
      const pos = tail & r.mask;
      const n = Math.min(used, r.size - pos, this.piece);
      this.sink(r.data.subarray(pos, pos + n));
      tail = (tail + n) | 0;
      Atomics.store(i32, r.tail, tail);
      if (Atomics.load(i32, r.waiting) !== 0) {
        Atomics.store(i32, r.waiting, 0);
        this.out.seg.ring(); // the producer's doorbell is in its own segment
      }
    }
  }

  /** Called once when the link closes (the peer is gone, or the group was destroyed). */
  onClose?: (err: Error) => void;

  /** Fails every queued write (the peer is gone); later writes fail at once. */
  close(err: Error): void {
    if (!this.failed) this.onClose?.(err);
    this.failed ??= err;
    for (const w of this.queue.splice(0)) w.reject(err);
  }

  get pendingWrites(): number {
    return this.queue.length;
  }
}

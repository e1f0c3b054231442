// One TCP connection to one peer: parses incoming frames and matches them, FIFO per
// (kind, group, tag), against posted receives. The socket reads into memory this class chooses
// (net's `onread`): a payload whose receive is already posted is read by the kernel straight into
// the destination view, with no copy and no allocation; headers and small or unexpected payloads
// go through one reused staging buffer. Unexpected payloads are buffered until claimed, up to
// UnexpectedLimits: a peer past them breaks the protocol and its connection is closed.
import type * as net from 'net';
import { AUTH_MAGIC } from '../auth/handshake';
import { FrameHeader, FrameKind, HEADER_BYTES, OpSignature, matchKey, readHeader, signaturesMatch } from './frame';
import { DEFAULT_UNEXPECTED_LIMITS, UnexpectedLimits } from './unexpected-limits';

export interface PostedRecv {
  into: Uint8Array;
  sig: OpSignature;
  resolve: (from: number) => void;
  reject: (err: Error) => void;
  /** Set once a frame has been matched to this receive (it can no longer be cancelled). */
  matched?: boolean;
}

/** A message that arrived before its receive was posted. */
interface Unexpected {
  header: FrameHeader;
  data: Buffer;
  filled: number;
  claim?: PostedRecv;
}

/** Raised when a frame's length or op signature disagrees with the posted receive. */
export class FrameMismatch extends Error {
  constructor(
    readonly peer: number,
    readonly theirs: FrameHeader,
    readonly ours: OpSignature,
    readonly expectedLength: number,
  ) {
    super('frame mismatch');
  }
}

export interface ConnectionEvents {
  /** A control frame (abort, bye) arrived complete; returns why it is malformed, if it is. */
  onControl(peer: number, header: FrameHeader, payload: Buffer): string | undefined;
  /** No specific receive was posted: an any-source receive may take the P2P message. */
  takeAnySource(header: FrameHeader): PostedRecv | undefined;
  /** A P2P message was buffered: any-source receives may want it. */
  onUnexpectedP2P(peer: number): void;
}

/**
 * Another way to the same peer for the frames (the shared-memory rings): the socket then only
 * tells that the peer is gone, by closing.
 */
export interface ByteLink {
  /** Writes one frame; resolves once its bytes are copied out (the caller may reuse them). */
  write(header: Uint8Array, data: Uint8Array): Promise<void>;
  /** Feeds whatever has arrived to the parser now. */
  poll(): void;
  /** Fails the frames still waiting to be written. */
  close(err: Error): void;
}

/** Staging buffer for headers and small payloads; one read never returns more than this. */
const STAGING_BYTES = 64 * 1024;
/** Payloads up to this size are copied behind their header and sent with one write. */
const COALESCE_BYTES = 4096;
/** Payload remainders at least this large are read straight into their destination. */
const DIRECT_READ_BYTES = 16 * 1024;
/**
 * A message nobody waits for yet starts in a buffer this large that doubles as its bytes arrive:
 * a header alone (its length is the peer's word) never makes us allocate more than this.
 */
const UNEXPECTED_INITIAL_BYTES = 64 * 1024;
/** The largest control payload: an abort notice (JSON); a bye has none. */
export const MAX_CONTROL_BYTES = 64 * 1024;

export class PeerConnection {
  readonly posted = new Map<string, PostedRecv[]>();
  readonly unexpected = new Map<string, Unexpected[]>();
  bytesReceived = 0;
  bytesSent = 0;
  closed = false;
  /** The peer announced it is leaving (Bye): its close is not a failure. */
  leaving = false;
  /** Set when the peer broke the framing protocol: what it did. The socket is then destroyed. */
  protocolError?: string;
  /** messages buffered in `unexpected`, and the bytes their headers declare */
  unexpectedFrames = 0;
  unexpectedBytes = 0;

  private readonly hdr = Buffer.allocUnsafe(HEADER_BYTES);
  private hdrFilled = 0;
  private cur?: FrameHeader;
  private target?: Uint8Array; // where the current payload goes; none: the payload is skipped
  /** The buffered message being filled: its buffer (target) grows as its bytes arrive. */
  private growing?: Unexpected;
  private targetFilled = 0;
  private onDone?: () => void;
  private readonly staging = Buffer.allocUnsafe(STAGING_BYTES);
  /** Where the last read went: the staging buffer, or (direct) the current payload's target. */
  private direct = false;
  /** The socket; set by attach() once connected. */
  socket!: net.Socket;
  /** When set, frames travel over it and the socket carries nothing (see ByteLink). */
  link?: ByteLink;
  /** Rank of the peer; -1 on an accepted connection until the dialer's hello arrives. */
  peer: number;
  /**
   * While set, every byte read goes here instead of the frame parser (the authentication
   * handshake); it returns what follows the handshake once it is over, else undefined.
   */
  gate?: (chunk: Buffer) => Buffer | undefined;
  /** The listener refused this (unauthenticated) connection: its first bytes were a refusal. */
  refused?: Buffer;
  private framesSeen = false;

  /** Pass as the socket's `onread` option: reads land where nextBuffer() says. */
  readonly onread = {
    buffer: () => this.nextBuffer(),
    callback: (n: number) => this.onRead(n),
  };

  constructor(
    peer: number,
    private readonly events: ConnectionEvents,
    /** Accepted side: called once the dialer's rank has arrived; false refuses the connection. */
    private readonly onHello?: (conn: PeerConnection) => boolean | void,
    private readonly limits: UnexpectedLimits = DEFAULT_UNEXPECTED_LIMITS,
  ) {
    this.peer = peer;
  }

  attach(socket: net.Socket): void {
    this.socket = socket;
    socket.setNoDelay(true);
  }

  private nextBuffer(): Uint8Array {
    const remaining = this.cur ? this.cur.length - this.targetFilled : 0;
    if (this.target && remaining >= DIRECT_READ_BYTES) {
      if (this.growing) this.reserve(Math.min(remaining, Math.max(this.target.length, STAGING_BYTES)));
      this.direct = true;
      return this.target.subarray(this.targetFilled, Math.min(this.target.length, this.cur!.length));
    }
    this.direct = false;
    return this.staging;
  }

  private onRead(n: number): boolean {
    if (this.protocolError) return true;
    if (this.direct) {
      this.targetFilled += n;
      if (this.targetFilled === this.cur!.length) this.end();
    } else this.feed(this.staging.subarray(0, n));
    return true;
  }

  send(header: Buffer, data: Uint8Array): Promise<void> {
    this.bytesSent += data.byteLength;
    if (this.link) return this.link.write(header, data);
    return new Promise((resolve, reject) => {
      const done = (err?: Error | null) => (err ? reject(err) : resolve());
      if (data.byteLength === 0) {
        this.socket.write(header, done);
        return;
      }
      if (data.byteLength <= COALESCE_BYTES) {
        // one write() instead of a corked writev of two buffers: cheaper for small frames
        const frame = Buffer.allocUnsafe(header.length + data.byteLength);
        frame.set(header, 0);
        frame.set(data, header.length);
        this.socket.write(frame, done);
        return;
      }
      this.socket.cork();
      this.socket.write(header);
      this.socket.write(data, done);
      this.socket.uncork();
    });
  }

  /** Parses bytes read into a buffer of ours (the staging buffer, or a 'data' chunk). */
  feed(chunk: Buffer): void {
    let off = 0;
    if (this.gate) {
      const rest = this.gate(chunk);
      if (rest === undefined) return; // still authenticating, or refused
      chunk = rest;
    }
    if (this.peer < 0) {
      // accepted connection: the dialer's first 4 bytes are its rank (sent alone, before any frame)
      const n = Math.min(4 - this.hdrFilled, chunk.length);
      chunk.copy(this.hdr, this.hdrFilled, 0, n);
      this.hdrFilled += n;
      off = n;
      if (this.hdrFilled < 4) return;
      this.hdrFilled = 0;
      this.peer = this.hdr.readUInt32LE(0);
      if (this.onHello?.(this) === false) {
        this.gate = () => undefined; // refused: nothing more is parsed
        return;
      }
    }
    while (off < chunk.length && !this.protocolError) {
      if (!this.cur) {
        const n = Math.min(HEADER_BYTES - this.hdrFilled, chunk.length - off);
        chunk.copy(this.hdr, this.hdrFilled, off, off + n);
        this.hdrFilled += n;
        off += n;
        if (this.hdrFilled === HEADER_BYTES) {
          this.hdrFilled = 0;
          if (!this.framesSeen && this.hdr[0] === AUTH_MAGIC[0]) {
            // no frame has this kind: the listener wants a secret we lack and says so; read no further
            this.refused = Buffer.from(this.hdr);
            this.gate = () => undefined;
            this.socket.destroy();
            return;
          }
          this.framesSeen = true;
          this.begin(readHeader(this.hdr));
        }
      } else {
        const n = Math.min(this.cur.length - this.targetFilled, chunk.length - off);
        if (this.target) {
          if (this.growing) this.reserve(n);
          this.target.set(chunk.subarray(off, off + n), this.targetFilled);
        }
        this.targetFilled += n;
        off += n;
        if (this.targetFilled === this.cur.length) this.end();
      }
    }
  }

  private begin(h: FrameHeader): void {
    this.cur = h;
    this.targetFilled = 0;
    if (h.kind === FrameKind.Collective || h.kind === FrameKind.P2P) {
      this.bytesReceived += h.length;
      const key = matchKey(h.kind, h.group, h.tag);
      let recv = this.posted.get(key)?.[0];
      if (recv) this.shift(this.posted, key);
      else if (h.kind === FrameKind.P2P) recv = this.events.takeAnySource(h);
      if (recv) {
        recv.matched = true;
        if (recv.into.byteLength !== h.length || (h.kind === FrameKind.Collective && !signaturesMatch(h, recv.sig))) {
          const err = new FrameMismatch(this.peer, h, recv.sig, recv.into.byteLength);
          this.discard(() => recv!.reject(err));
          return;
        }
        this.target = recv.into;
        const r = recv;
        this.onDone = () => r.resolve(this.peer);
      } else {
        const { frames, bytes } = this.limits;
        if (this.unexpectedFrames + 1 > frames) return this.violate(`sent more than ${frames} messages nobody had asked for yet (CMESH_MAX_UNEXPECTED_FRAMES)`);
        if (this.unexpectedBytes + h.length > bytes) {
          return this.violate(`sent ${this.unexpectedBytes + h.length} bytes nobody had asked for yet, more than ${bytes} (CMESH_MAX_UNEXPECTED_BYTES)`);
        }
        const u: Unexpected = { header: h, data: Buffer.allocUnsafe(Math.min(h.length, UNEXPECTED_INITIAL_BYTES)), filled: 0 };
        let q = this.unexpected.get(key);
        if (!q) this.unexpected.set(key, (q = []));
        q.push(u);
        this.unexpectedFrames++;
        this.unexpectedBytes += h.length;
        this.target = u.data;
        this.growing = u;
        this.onDone = () => {
          u.filled = h.length;
          if (u.claim) {
            const q2 = this.unexpected.get(key)!;
            q2.splice(q2.indexOf(u), 1);
            if (!q2.length) this.unexpected.delete(key);
            this.released(u);
            this.deliver(u, u.claim);
          } else if (h.kind === FrameKind.P2P) this.events.onUnexpectedP2P(this.peer);
        };
      }
    } else if (h.kind === FrameKind.Abort || h.kind === FrameKind.Bye) {
      const max = h.kind === FrameKind.Bye ? 0 : MAX_CONTROL_BYTES;
      if (h.length > max) return this.violate(`a ${h.kind === FrameKind.Bye ? 'bye' : 'abort'} frame of ${h.length} bytes (at most ${max})`);
      const payload = Buffer.allocUnsafe(h.length);
      this.target = payload;
      this.onDone = () => {
        const bad = this.events.onControl(this.peer, h, payload);
        if (bad) this.violate(bad);
      };
    } else return this.violate(`a frame of unknown kind ${h.kind}`);
    if (h.length === 0) this.end();
  }

  /** Skips the current payload without storing it, then calls `then`. */
  private discard(then: () => void): void {
    this.target = undefined;
    this.onDone = then;
  }

  /** Makes room for n more bytes in the growing message's buffer (doubling, up to its length). */
  private reserve(n: number): void {
    const t = this.target!;
    const need = this.targetFilled + n;
    if (t.length >= need) return;
    const grown = Buffer.allocUnsafe(Math.min(this.cur!.length, Math.max(need, t.length * 2)));
    grown.set(t.subarray(0, this.targetFilled));
    this.target = grown;
    this.growing!.data = grown;
  }

  private end(): void {
    const done = this.onDone!;
    this.cur = undefined;
    this.target = undefined;
    this.growing = undefined;
    this.onDone = undefined;
    done();
  }

  /**
   * The peer broke the framing protocol: nothing more is read from it and the connection is closed
   * (its owner then fails what waits on this peer, saying what it did).
   */
  violate(why: string): void {
    if (this.protocolError) return;
    this.protocolError = why;
    this.cur = undefined;
    this.target = undefined;
    this.growing = undefined;
    this.onDone = undefined;
    this.socket?.destroy();
  }

  private shift<T>(m: Map<string, T[]>, key: string): void {
    const q = m.get(key)!;
    q.shift();
    if (!q.length) m.delete(key);
  }

  /** Posts a receive for (kind, group, tag): takes a buffered message when one is there. */
  post(key: string, recv: PostedRecv): void {
    const u = this.unexpected.get(key)?.find((x) => !x.claim);
    if (u) {
      recv.matched = true;
      if (u.filled === u.header.length) {
        this.unexpected.get(key)!.splice(this.unexpected.get(key)!.indexOf(u), 1);
        if (!this.unexpected.get(key)!.length) this.unexpected.delete(key);
        this.released(u);
        this.deliver(u, recv);
      } else u.claim = recv; // still arriving: deliver on completion
      return;
    }
    let q = this.posted.get(key);
    if (!q) this.posted.set(key, (q = []));
    q.push(recv);
  }

  /** Takes the first complete buffered P2P message of a group/tag (any-source receives). */
  takeUnexpected(key: string): Unexpected | undefined {
    const q = this.unexpected.get(key);
    const i = q ? q.findIndex((u) => !u.claim && u.filled === u.header.length) : -1;
    if (i < 0) return undefined;
    const [u] = q!.splice(i, 1);
    if (!q!.length) this.unexpected.delete(key);
    this.released(u);
    return u;
  }

  /** A buffered message left `unexpected`: it no longer counts against the limits. */
  private released(u: Unexpected): void {
    this.unexpectedFrames--;
    this.unexpectedBytes -= u.header.length;
  }

  deliver(u: Unexpected, recv: PostedRecv): void {
    if (recv.into.byteLength !== u.header.length || (u.header.kind === FrameKind.Collective && !signaturesMatch(u.header, recv.sig))) {
      recv.reject(new FrameMismatch(this.peer, u.header, recv.sig, recv.into.byteLength));
      return;
    }
    recv.into.set(u.data);
    recv.resolve(this.peer);
  }

  /** Removes and rejects every posted receive whose key matches. */
  rejectPosted(err: Error, keyFilter?: (key: string) => boolean): void {
    for (const [key, q] of [...this.posted]) {
      if (keyFilter && !keyFilter(key)) continue;
      this.posted.delete(key);
      for (const r of q) r.reject(err);
    }
    for (const [key, q] of this.unexpected) {
      if (keyFilter && !keyFilter(key)) continue;
      for (const u of q) if (u.claim) u.claim.reject(err);
    }
  }

  /** Forgets a posted receive that was not matched yet (timeouts). */
  cancel(key: string, recv: PostedRecv): boolean {
    const q = this.posted.get(key);
    const i = q ? q.indexOf(recv) : -1;
    if (i < 0) return false;
    q!.splice(i, 1);
    if (!q!.length) this.posted.delete(key);
    return true;
  }
}

// The TcpStore server (c10d's TCPStore daemon): an in-memory map plus parked get/wait requests
// that are answered as soon as their keys appear. What a client can make it hold is bounded
// (TcpStoreLimits): a request over a limit is refused with an error naming it and changes nothing.
import * as net from 'net';
import { InvalidArgumentError } from '../errors';
import { AUTH_MAGIC, AUTH_TIMEOUT_MS, AuthListener, logRefusal, refusal, RefuseReason } from '../auth/handshake';
import { resolveSecret } from '../auth/secret';
import {
  Cmd,
  connectionRefusalFrame,
  encodeFrame,
  flag,
  Frame,
  FrameDecoder,
  i64,
  LIMIT_ERROR,
  MalformedFrameError,
  readI64,
  REPLY_ERROR,
  REPLY_OK,
} from './frame-codec';

/** What the server holds at most; a request past one is refused (StoreLimitError at the client). */
export interface TcpStoreLimits {
  /** bytes of one request frame (a set's key and value); a larger one is refused and skipped unread */
  maxFrameBytes: number;
  /** keys held */
  maxKeys: number;
  /** bytes of keys and values held together */
  maxBytes: number;
  /** open connections (authenticating ones too); one more is refused at once */
  maxConnections: number;
  /** keys the parked gets and waits of one connection wait for (a get is one, a wait one per absent key) */
  maxWaitsPerConnection: number;
  /** the same over every connection */
  maxWaits: number;
}

export const DEFAULT_TCP_STORE_LIMITS: Readonly<TcpStoreLimits> = {
  maxFrameBytes: 64 * 2 ** 20,
  maxKeys: 1_000_000,
  maxBytes: 2 ** 30,
  maxConnections: 32_768,
  maxWaitsPerConnection: 65_536,
  maxWaits: 1_000_000,
};

/** The defaults with `given` over them, each checked to be a positive integer. */
function storeLimits(given: Partial<TcpStoreLimits> = {}): TcpStoreLimits {
  const out = { ...DEFAULT_TCP_STORE_LIMITS };
  for (const [k, v] of Object.entries(given) as [keyof TcpStoreLimits, unknown][]) {
    if (v === undefined) continue;
    if (!(k in DEFAULT_TCP_STORE_LIMITS)) throw new InvalidArgumentError(`TcpStore limits: unknown limit ${JSON.stringify(k)}`);
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw new InvalidArgumentError(`TcpStore limits: ${k} must be a positive integer, got ${String(v)}`);
    out[k] = v;
  }
  return out;
}

/** A parked get or wait: answered once, when every one of its keys exists. */
interface Waiter {
  socket: net.Socket;
  keys: string[];
  /** how many of its keys it is parked on (absent when it was parked) */
  missing: number;
  reply: () => void;
}

/**
 * Accept queue asked of the kernel, which caps it at net.core.somaxconn: thousands of ranks
 * connect at once, and with Node's default of 511 the connections beyond it wait for a SYN
 * retransmission (1 s, then 3 s ...).
 */
const LISTEN_BACKLOG = 65535;

export class TcpStoreServer {
  private readonly data = new Map<string, Buffer>();
  /** bytes of the keys (UTF-8) and values in `data` */
  private bytes = 0;
  /** keys parked requests wait for: per connection, and in all */
  private readonly waitsBy = new Map<net.Socket, number>();
  private waits = 0;
  readonly limits: TcpStoreLimits;
  /**
   * Parked requests by the absent key they wait for, and by connection: a write wakes only the
   * requests waiting for its key (O(1) per request, however many are parked on other keys), and a
   * closing connection drops only its own.
   */
  private readonly waiting = new Map<string, Set<Waiter>>();
  private readonly parked = new Map<net.Socket, Set<Waiter>>();
  private readonly sockets = new Set<net.Socket>();
  /**
   * Replies of this event-loop turn by connection, written at its end: one write (one system call)
   * per connection per turn, however many requests of it a chunk carried.
   */
  private readonly outbox = new Map<net.Socket, Buffer[]>();
  private flushing = false;
  private server?: net.Server;
  port = 0;

  /**
   * With a key, every connection must pass the challenge (auth/handshake.ts) before the server
   * reads a single frame from it; without one, a client that tries to authenticate is refused.
   */
  constructor(
    private readonly key?: Buffer,
    limits: Partial<TcpStoreLimits> = {},
  ) {
    this.limits = storeLimits(limits);
  }

  async listen(host: string, port: number): Promise<number> {
    // noDelay: TCP_NODELAY set on the accepted handle itself, not through a socket method per connection
    const server = net.createServer({ noDelay: true }, (s) => this.accept(s));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as net.AddressInfo).port;
    return this.port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(socket: net.Socket): void {
    if (this.sockets.size >= this.limits.maxConnections) {
      // refused before any handshake: an ERROR frame the client reads as StoreLimitError
      socket.on('error', () => undefined);
      socket.write(connectionRefusalFrame(`it has ${this.sockets.size} open connections, its limit (maxConnections ${this.limits.maxConnections})`));
      closeGracefully(socket);
      return;
    }
    this.sockets.add(socket);
    // an oversize request is refused and its body skipped: the connection goes on
    const decoder = new FrameDecoder(this.limits.maxFrameBytes, true);
    // read only to log a refusal: it costs a getpeername() per connection
    const remote = () => `${socket.remoteAddress}:${socket.remotePort}`;
    const refuse = (reason: RefuseReason, reply: Buffer) => {
      logRefusal('TcpStore', remote(), reason);
      this.flushTo(socket);
      socket.write(reply);
      closeGracefully(socket);
    };
    const frames = (chunk: Buffer) => {
      let parsed: Frame[];
      try {
        parsed = decoder.push(chunk);
      } catch (err) {
        // a client speaking another protocol: the rest of the stream cannot be framed
        const malformed = err instanceof MalformedFrameError ? err : undefined;
        this.run(socket, malformed?.frames ?? []);
        if (malformed?.id !== undefined) this.fail(socket, malformed.id, malformed.message);
        this.flushTo(socket);
        closeGracefully(socket);
        return;
      }
      this.run(socket, parsed);
    };
    let first = true;
    const serve = (chunk: Buffer) => {
      // a client with a secret talking to a server without one: tell it so, rather than "malformed"
      if (first && chunk.length >= 4 && chunk.readUInt32LE(0) === AUTH_MAGIC.readUInt32LE(0)) {
        refuse(RefuseReason.ListenerHasNoSecret, refusal(RefuseReason.ListenerHasNoSecret));
        return;
      }
      first = false;
      frames(chunk);
    };
    if (this.key) {
      const auth = new AuthListener(this.key, 'store');
      // bounded: a connection that never authenticates does not stay open
      const timer = setTimeout(() => {
        logRefusal('TcpStore', remote(), RefuseReason.Protocol);
        socket.destroy();
      }, AUTH_TIMEOUT_MS);
      const challenge = (chunk: Buffer) => {
        const step = auth.push(chunk);
        if (step.state === 'more') {
          if (step.send) socket.write(step.send);
          return;
        }
        clearTimeout(timer);
        socket.off('data', challenge);
        if (step.state === 'failed') return refuse(step.reason, step.send!);
        socket.write(step.send!);
        first = false;
        socket.on('data', serve);
        if (step.rest.length) frames(step.rest);
      };
      socket.on('data', challenge);
      socket.on('close', () => clearTimeout(timer));
    } else socket.on('data', serve);
    const drop = () => {
      this.sockets.delete(socket);
      this.outbox.delete(socket);
      const mine = this.parked.get(socket);
      if (!mine) return;
      this.parked.delete(socket);
      for (const w of mine) this.unpark(w);
      this.waitsBy.delete(socket);
    };
    socket.on('close', drop);
    socket.on('error', drop);
  }

  private reply(socket: net.Socket, id: number, fields: Uint8Array[] = []): void {
    this.send(socket, encodeFrame(REPLY_OK, id, fields));
  }

  private fail(socket: net.Socket, id: number, message: string, kind?: string): void {
    this.send(socket, encodeFrame(REPLY_ERROR, id, [Buffer.from(message, 'utf8'), ...(kind ? [Buffer.from(kind)] : [])]));
  }

  /** Queues a frame for the end of this turn (see outbox). */
  private send(socket: net.Socket, frame: Buffer): void {
    if (socket.destroyed) return;
    const queued = this.outbox.get(socket);
    if (queued) return void queued.push(frame);
    this.outbox.set(socket, [frame]);
    if (!this.flushing) {
      this.flushing = true;
      process.nextTick(this.flushAll);
    }
  }

  private readonly flushAll = (): void => {
    this.flushing = false;
    for (const socket of this.outbox.keys()) this.flushTo(socket);
  };

  /** Writes what is queued for `socket` now (before ending it, or at the end of the turn). */
  private flushTo(socket: net.Socket): void {
    const frames = this.outbox.get(socket);
    if (!frames) return;
    this.outbox.delete(socket);
    if (!socket.destroyed && socket.writable) writeFrames(socket, frames);
  }

  /** A request over a limit: refused, naming it; nothing changed. */
  private refuseOverLimit(socket: net.Socket, id: number, message: string): void {
    this.fail(socket, id, message, LIMIT_ERROR);
  }

  private run(socket: net.Socket, frames: Frame[]): void {
    for (const f of frames) {
      if (f.oversize !== undefined) {
        this.refuseOverLimit(socket, f.id, `a request of ${f.oversize} bytes is over the store's limit (maxFrameBytes ${this.limits.maxFrameBytes})`);
        continue;
      }
      const problem = checkFields(f);
      if (problem) this.fail(socket, f.id, problem);
      else this.handle(socket, f);
    }
  }

  /**
   * Stores `value` under `k` (key bytes `keyBytes`) unless that would go over maxKeys or maxBytes:
   * then refuses the request and returns false, nothing changed.
   */
  private put(socket: net.Socket, id: number, k: string, keyBytes: number, value: Buffer): boolean {
    const cur = this.data.get(k);
    if (cur === undefined && this.data.size >= this.limits.maxKeys) {
      this.refuseOverLimit(socket, id, `key ${k} not added: the store holds ${this.data.size} keys, its limit (maxKeys ${this.limits.maxKeys})`);
      return false;
    }
    const grow = value.length - (cur === undefined ? -keyBytes : cur.length);
    if (this.bytes + grow > this.limits.maxBytes) {
      this.refuseOverLimit(
        socket,
        id,
        `key ${k} not written: the store would hold ${this.bytes + grow} bytes of keys and values, over its limit (maxBytes ${this.limits.maxBytes})`,
      );
      return false;
    }
    this.data.set(k, value);
    this.bytes += grow;
    return true;
  }

  /** Runs a command whose fields checkFields() accepted. */
  private handle(socket: net.Socket, { tag, id, fields }: Frame): void {
    // every command but NUM_KEYS names a key first (checkFields)
    const k = tag === Cmd.NUM_KEYS ? '' : fields[0].toString('utf8');
    switch (tag) {
      case Cmd.SET:
      case Cmd.SET_QUIET: {
        if (!this.put(socket, id, k, fields[0].length, fields[1] ?? Buffer.alloc(0))) return;
        if (tag === Cmd.SET) this.reply(socket, id);
        this.wake(k);
        return;
      }
      case Cmd.GET: {
        const value = this.data.get(k);
        // present: answered now, with nothing allocated to park it
        if (value !== undefined) return this.reply(socket, id, [value]);
        this.park({ socket, keys: [k], missing: 0, reply: () => this.reply(socket, id, [this.data.get(k)!]) }, id);
        return;
      }
      case Cmd.WAIT:
        this.park({ socket, keys: fields.map((f) => f.toString('utf8')), missing: 0, reply: () => this.reply(socket, id) }, id);
        return;
      case Cmd.ADD: {
        const held = this.data.get(k)?.toString('utf8');
        const cur = held === undefined ? 0 : /^-?\d{1,16}$/.test(held) ? Number(held) : NaN;
        if (!Number.isSafeInteger(cur)) return this.fail(socket, id, `key ${k} does not hold an integer`);
        const next = cur + readI64(fields[1]);
        if (!Number.isSafeInteger(next)) return this.fail(socket, id, `add: ${held ?? 0} + ${fields[1].readBigInt64LE(0)} is outside the safe integer range`);
        if (!this.put(socket, id, k, fields[0].length, Buffer.from(String(next)))) return;
        this.reply(socket, id, [i64(next)]);
        this.wake(k);
        return;
      }
      case Cmd.COMPARE_SET: {
        const [, expected, desired] = fields;
        const cur = this.data.get(k);
        if ((cur === undefined && expected.length === 0) || (cur !== undefined && cur.equals(expected))) {
          if (!this.put(socket, id, k, fields[0].length, desired)) return;
          this.reply(socket, id, [desired]);
          this.wake(k);
        } else {
          this.reply(socket, id, [cur ?? expected]);
        }
        return;
      }
      case Cmd.CHECK:
        this.reply(socket, id, [flag(fields.every((f) => this.data.has(f.toString('utf8'))))]);
        return;
      case Cmd.DELETE: {
        const cur = this.data.get(k);
        if (cur !== undefined) this.bytes -= fields[0].length + cur.length;
        this.reply(socket, id, [flag(this.data.delete(k))]);
        return;
      }
      case Cmd.NUM_KEYS:
        this.reply(socket, id, [i64(this.data.size)]);
        return;
    }
  }

  /**
   * Answers w now if every key exists, else parks it on each absent key. A new request (`id`)
   * that would take its connection's or the server's parked keys over their limit is refused; a
   * request woken and parked again (a key deleted since) was counted already and is not.
   */
  private park(w: Waiter, id?: number): void {
    let absent: string[] | undefined;
    // a get's one key needs no Set: the common request stays allocation-free
    for (const k of w.keys.length === 1 ? w.keys : new Set(w.keys)) if (!this.data.has(k)) (absent ??= []).push(k);
    if (!absent) return w.reply();
    const mine = this.waitsBy.get(w.socket) ?? 0;
    if (id !== undefined) {
      const { maxWaitsPerConnection: perConnection, maxWaits: total } = this.limits;
      if (mine + absent.length > perConnection) {
        return this.refuseOverLimit(
          w.socket,
          id,
          `not parked: this connection already waits for ${mine} keys, its limit (maxWaitsPerConnection ${perConnection})`,
        );
      }
      if (this.waits + absent.length > total)
        return this.refuseOverLimit(w.socket, id, `not parked: the store already waits for ${this.waits} keys, its limit (maxWaits ${total})`);
    }
    for (const k of absent) {
      let set = this.waiting.get(k);
      if (!set) this.waiting.set(k, (set = new Set()));
      set.add(w);
    }
    w.missing = absent.length;
    this.waitsBy.set(w.socket, mine + absent.length);
    this.waits += absent.length;
    let parked = this.parked.get(w.socket);
    if (!parked) this.parked.set(w.socket, (parked = new Set()));
    parked.add(w);
  }

  /** Forgets a parked request (its connection closed). */
  private unpark(w: Waiter): void {
    for (const k of w.keys) {
      const set = this.waiting.get(k);
      if (!set?.delete(w)) continue;
      if (set.size === 0) this.waiting.delete(k);
      this.countWaits(w.socket, -1);
    }
  }

  private countWaits(socket: net.Socket, n: number): void {
    this.waits += n;
    this.waitsBy.set(socket, (this.waitsBy.get(socket) ?? 0) + n);
  }

  /** Keys parked requests wait for: in all, or of one connection (tests, metrics). */
  parkedKeys(socket?: net.Socket): number {
    return socket ? (this.waitsBy.get(socket) ?? 0) : this.waits;
  }

  /** Keys and bytes held, and open connections. */
  usage(): { keys: number; bytes: number; connections: number; waits: number } {
    return { keys: this.data.size, bytes: this.bytes, connections: this.sockets.size, waits: this.waits };
  }

  /** `key` was written: the requests parked on it have one absent key fewer. */
  private wake(key: string): void {
    const set = this.waiting.get(key);
    if (!set) return;
    this.waiting.delete(key);
    for (const w of set) {
      this.countWaits(w.socket, -1);
      if (--w.missing > 0) continue;
      this.parked.get(w.socket)?.delete(w);
      // a key seen earlier may have been deleted since: park() answers or parks it again
      this.park(w);
    }
  }
}

/**
 * Ends a connection the server will not read frames from any more: FIN after the replies already
 * written, while what the client still sends is read and dropped, never parsed. Closing with
 * unread bytes would make the kernel reset the connection and drop the replies it had not yet
 * sent; a client that has not closed its side within LINGER_MS is cut off.
 */
function closeGracefully(socket: net.Socket): void {
  socket.removeAllListeners('data');
  socket.on('data', () => undefined);
  socket.end();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

const LINGER_MS = 1000;

/** Frames up to this size in all are joined into one buffer; larger batches go out as one writev. */
const JOIN_BYTES = 64 * 1024;

/** Writes several frames with one system call. */
export function writeFrames(socket: net.Socket, frames: Buffer[]): void {
  if (frames.length === 1) return void socket.write(frames[0]);
  let bytes = 0;
  for (const f of frames) bytes += f.length;
  if (bytes <= JOIN_BYTES) return void socket.write(Buffer.concat(frames, bytes));
  socket.cork();
  for (const f of frames) socket.write(f);
  socket.uncork();
}

/** Fields each command takes: [min, max] (a WAIT or CHECK names 1 to 65535 keys). */
const FIELDS: Record<number, [number, number]> = {
  [Cmd.SET]: [2, 2],
  [Cmd.SET_QUIET]: [2, 2],
  [Cmd.GET]: [1, 1],
  [Cmd.ADD]: [2, 2],
  [Cmd.COMPARE_SET]: [3, 3],
  [Cmd.WAIT]: [1, 0xffff],
  [Cmd.CHECK]: [1, 0xffff],
  [Cmd.DELETE]: [1, 1],
  [Cmd.NUM_KEYS]: [0, 0],
};

/** Why a well-framed request cannot be run (answered with an error, nothing changed), or undefined. */
function checkFields({ tag, fields }: Frame): string | undefined {
  const range = FIELDS[tag];
  if (!range) return `unknown store command ${tag}`;
  const [min, max] = range;
  if (fields.length < min || fields.length > max) return `store command ${tag} takes ${min === max ? min : `${min} to ${max}`} fields, got ${fields.length}`;
  if (tag === Cmd.ADD && fields[1].length !== 8) return `add: the amount must be 8 bytes, got ${fields[1].length}`;
  if (tag === Cmd.ADD && !Number.isSafeInteger(readI64(fields[1]))) return `add: amount ${fields[1].readBigInt64LE(0)} is outside the safe integer range`;
  return undefined;
}

/**
 * A standalone store server (torch's TCPStore daemon without a client), e.g. hosted by a launcher
 * for its workers: `const srv = await startTcpStoreServer({ port: 0 }); srv.port; await srv.close()`. With
 * `secret` (default: CMESH_SECRET), only clients holding the same secret get past the challenge.
 * `limits` bounds what clients can make it hold (DEFAULT_TCP_STORE_LIMITS otherwise).
 */
export async function startTcpStoreServer(
  opts: { host?: string; port?: number; secret?: string; limits?: Partial<TcpStoreLimits> } = {},
): Promise<TcpStoreServer> {
  const port = opts.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InvalidArgumentError(`startTcpStoreServer: port must be an integer in [0, 65535], got ${JSON.stringify(port)}`);
  const server = new TcpStoreServer(resolveSecret(opts.secret, process.env, 'startTcpStoreServer: secret'), opts.limits);
  await server.listen(opts.host ?? '127.0.0.1', port);
  return server;
}

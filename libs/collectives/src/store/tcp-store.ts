// TcpStore: c10d's TCPStore. The master hosts the server in-process; every rank (the master too)
// talks to it through one client connection with pipelined requests. As torch's, a set does not
// wait for an answer (SET_QUIET: the server answers only a refusal); the requests of one
// event-loop turn leave in one write, and the server runs them in order, so a later get, wait or
// check of this client sees the set. A refused set fails the next operation (or close()).
import * as net from 'net';
import { AuthenticationError, DistTimeoutError, InvalidArgumentError, StoreError, StoreLimitError } from '../errors';
import { AUTH_MAGIC, AuthDialer, readRefusal, refuseText, RefuseReason } from '../auth/handshake';
import { resolveSecret } from '../auth/secret';
import { Cmd, encodeFrame, Frame, FrameDecoder, i64, LIMIT_ERROR, MalformedFrameError, readConnectionRefusal, readI64, REPLY_ERROR, utf8 } from './frame-codec';
import { Store, StoreValue, toBuffer } from './store';
import { TcpStoreLimits, TcpStoreServer, writeFrames } from './tcp-store-server';
import { timerMs } from '../timer';
import { checkAmount, checkKey, checkKeys, checkTimeout, checkValue } from './validate';

export const DEFAULT_STORE_TIMEOUT_MS = 30 * 60 * 1000;

export interface TcpStoreOptions {
  host?: string;
  /** Server port; 0 with isMaster picks a free one (read `store.port` once ready). */
  port: number;
  isMaster?: boolean;
  /**
   * c10d's world_size + wait_for_workers: every instance counts itself in on a reserved key and
   * the master's ready() waits until `worldSize` instances have connected (so numKeys() is one
   * more than the keys you set, as in torch).
   */
  worldSize?: number;
  timeoutMs?: number;
  /**
   * The run's shared secret (default: CMESH_SECRET; at least 16 characters). Set, the server
   * admits only clients that prove it (HMAC-SHA256 challenge, both ways) and this client only
   * talks to a server that proves it; a mismatch fails with AuthenticationError.
   */
  secret?: string;
  /** The master's server: what clients can make it hold (DEFAULT_TCP_STORE_LIMITS for the rest). */
  limits?: Partial<TcpStoreLimits>;
}

/** The reserved key that counts connected instances when worldSize is given. */
export const TCP_STORE_WORKERS_KEY = 'cmesh/store/num_workers';

interface Pending {
  resolve: (fields: Buffer[]) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
  /** its place in the order of requests sent on this connection */
  seq: number;
  /** a get, wait, check or count: changes nothing, so it can be failed before its answer */
  readOnly: boolean;
}

/** A quiet set the server has not yet been seen to run. */
interface Unconfirmed {
  key: string;
  seq: number;
}

const READ_ONLY: ReadonlySet<number> = new Set([Cmd.GET, Cmd.WAIT, Cmd.CHECK, Cmd.NUM_KEYS]);

/**
 * Every client of this process reads into this one buffer (onread: no stream machinery or
 * allocation per read); a read is handled before the next one, and what is kept is copied.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** Quiet sets in a row after which one request is sent that confirms them (bounds `unconfirmed`). */
const CONFIRM_EVERY = 4096;
/** close() waits at most this long (or the store's timeout, if shorter) to learn of refused sets. */
const CLOSE_CONFIRM_MS = 10_000;

/** One frame carries at most 65535 keys. */
function checkKeyCount(keys: string[]): void {
  if (keys.length > 0xffff) throw new InvalidArgumentError(`TcpStore: at most 65535 keys per call, got ${keys.length}`);
}

export class TcpStore implements Store {
  timeoutMs: number;
  readonly host: string;
  port: number;
  private server?: TcpStoreServer;
  private socket?: net.Socket;
  private nextId = 1;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  /** quiet sets by request id, in the order sent, until an answer to a later request arrives */
  private readonly unconfirmed = new Map<number, Unconfirmed>();
  /** the first refusal of a quiet set no operation has reported yet, and the keys of later ones */
  private unreported?: { error: StoreError; later: number; keys: string[] };
  /** refusals of quiet sets read from the current chunk, reported together after it */
  private fresh: { error: StoreError; seq: number; key: string }[] = [];
  /** why the connection ended, once it has */
  private lost?: StoreError;
  /** frames of this turn, written together at its end */
  private outbox: Buffer[] = [];
  private flushing = false;
  private closed = false;
  private readonly started: Promise<void>;
  /** started has resolved */
  private up = false;
  /** calls waiting for start-up: until they are queued, later calls wait too (the order of calls is the wire's) */
  private starting = 0;
  readonly worldSize?: number;
  private readonly key?: Buffer;
  /** What is done with the bytes of each read (the challenge's, then the frames'). */
  private onChunk: (chunk: Buffer) => void = () => undefined;
  /** Why the connection ended, when the server refused it. */
  private refused?: AuthenticationError | StoreLimitError;
  private readonly limits?: Partial<TcpStoreLimits>;

  /**
   * Like torch's TCPStore(host, port, world_size, is_master, timeout): starts the server (master)
   * and connects in the background; every operation waits for that, and `await store.ready()`
   * surfaces a failure to bind or connect. `TcpStore.create()` does both in one call.
   */
  constructor(opts: TcpStoreOptions) {
    if (typeof opts !== 'object' || opts === null) throw new InvalidArgumentError('TcpStore: options object expected');
    if (opts.host !== undefined && (typeof opts.host !== 'string' || !opts.host)) {
      throw new InvalidArgumentError(`TcpStore: host must be a non-empty string, got ${JSON.stringify(opts.host)}`);
    }
    if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535 || (opts.port === 0 && !opts.isMaster)) {
      throw new InvalidArgumentError(`TcpStore: port must be an integer in [${opts.isMaster ? 0 : 1}, 65535], got ${JSON.stringify(opts.port)}`);
    }
    if (opts.worldSize !== undefined && (!Number.isInteger(opts.worldSize) || opts.worldSize < 1)) {
      throw new InvalidArgumentError(`TcpStore: worldSize must be an integer >= 1, got ${JSON.stringify(opts.worldSize)}`);
    }
    if (opts.timeoutMs !== undefined) checkTimeout(opts.timeoutMs);
    this.key = resolveSecret(opts.secret, process.env, 'TcpStore: secret');
    this.host = opts.host ?? '127.0.0.1';
    this.port = opts.port;
    this.worldSize = opts.worldSize;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.limits = opts.limits;
    this.started = this.start(!!opts.isMaster);
    this.started.then(
      () => (this.up = true),
      () => {}, // reported by ready() and by every operation
    );
  }

  /** Starts the server (when isMaster) and connects, retrying until the timeout. */
  static async create(opts: TcpStoreOptions): Promise<TcpStore> {
    const store = new TcpStore(opts);
    try {
      await store.ready();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /** Resolves once the server (master) listens, this client is connected and, with worldSize, all workers joined. */
  ready(): Promise<void> {
    return this.started;
  }

  private async start(isMaster: boolean): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    if (isMaster) {
      this.server = new TcpStoreServer(this.key, this.limits);
      this.port = await this.server.listen(this.host, this.port);
    }
    await this.connect();
    if (this.worldSize === undefined) return;
    let joined = readI64((await this.request(Cmd.ADD, [utf8(TCP_STORE_WORKERS_KEY), i64(1)]))[0]);
    if (!isMaster) return;
    while (joined < this.worldSize) {
      if (Date.now() >= deadline) {
        throw new DistTimeoutError(`TcpStore: only ${joined} of ${this.worldSize} workers connected to ${this.host}:${this.port} within ${this.timeoutMs} ms`);
      }
      await new Promise((r) => setTimeout(r, 10));
      joined = readI64((await this.request(Cmd.ADD, [utf8(TCP_STORE_WORKERS_KEY), i64(0)]))[0]);
    }
  }

  /** True when this store hosts the server. */
  get isMaster(): boolean {
    return this.server !== undefined;
  }

  private async connect(): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    let lastError: Error | undefined;
    while (Date.now() < deadline && !this.closed) {
      try {
        this.socket = await new Promise<net.Socket>((resolve, reject) => {
          const onread = { buffer: READ_BUFFER, callback: (n: number) => (this.onChunk(READ_BUFFER.subarray(0, n)), true) };
          const s = net.connect({ host: this.host, port: this.port, onread }, () => resolve(s));
          s.once('error', reject);
        });
        if (this.closed) this.socket.destroy();
        break;
      } catch (err) {
        lastError = err as Error;
        await new Promise((r) => setTimeout(r, Math.min(100, Math.max(0, deadline - Date.now()))));
      }
    }
    if (this.closed) throw new StoreError(`TcpStore: store at ${this.host}:${this.port} was closed while connecting`);
    if (!this.socket) {
      throw new DistTimeoutError(`TcpStore: could not connect to ${this.host}:${this.port} within ${this.timeoutMs} ms (${lastError?.message ?? 'timeout'})`);
    }
    const socket = this.socket;
    socket.setNoDelay(true);
    if (this.key) await this.authenticate(socket, this.key, deadline);
    socket.removeAllListeners('error');
    const decoder = new FrameDecoder();
    let first = true;
    // set before this turn ends: no read can come in between
    this.onChunk = (chunk) => {
      // a server with a secret refuses a client without one: say so instead of "malformed frame"
      if (first && chunk.length >= 4 && chunk.readUInt32LE(0) === AUTH_MAGIC.readUInt32LE(0)) {
        this.refused = this.refusal(readRefusal(chunk) ?? RefuseReason.NoAuthentication);
        socket.destroy();
        return;
      }
      first = false;
      let frames: Frame[];
      let malformed: Error | undefined;
      const full = readConnectionRefusal(chunk);
      if (full !== undefined) {
        this.refused = this.limitRefusal(full);
        socket.destroy();
        return;
      }
      try {
        frames = decoder.push(chunk, true);
      } catch (err) {
        // the replies before the malformed frame are good; then the stream is not a store's
        frames = err instanceof MalformedFrameError ? err.frames : [];
        malformed = err as Error;
      }
      for (const f of frames) this.answer(f);
      this.reportRefusedSets();
      if (malformed) socket.destroy(malformed); // not a store server: fails every pending request
    };
    const fail = (err?: Error) => {
      if (this.lost) return;
      const sets = [...this.unconfirmed.values()].map((u) => u.key);
      const unsure = sets.length
        ? `; the server may not have stored the last ${sets.length} set(s): ${sets.slice(0, 8).join(', ')}${sets.length > 8 ? ', ...' : ''}`
        : '';
      const e = this.refused ?? new StoreError(`TcpStore: connection to ${this.host}:${this.port} lost${err ? `: ${err.message}` : ''}${unsure}`);
      this.lost = e;
      // sets that may be lost: a pending request says so, else the next operation or close()
      if (sets.length && this.pending.size === 0) this.keep(e);
      this.unconfirmed.clear();
      this.outbox = [];
      for (const p of this.pending.values()) {
        if (p.timer) clearTimeout(p.timer);
        p.reject(e);
      }
      this.pending.clear();
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
  }

  /** An answer: settles its request, or reports a refused quiet set. */
  private answer(f: Frame): void {
    const p = this.pending.get(f.id);
    const set = p ? undefined : this.unconfirmed.get(f.id);
    if (!p && !set) return; // timed out earlier
    // the server runs a connection's requests in order: every quiet set before this one was stored
    this.confirmBefore(p ? p.seq : set!.seq);
    const error = f.tag === REPLY_ERROR ? this.replyError(f, set?.key) : undefined;
    if (set) {
      this.unconfirmed.delete(f.id);
      if (error) this.fresh.push({ error, seq: set.seq, key: set.key });
      return;
    }
    this.pending.delete(f.id);
    if (p!.timer) clearTimeout(p!.timer);
    // a read sent after a set refused in this chunk reports that refusal instead of its answer
    if (p!.readOnly && this.fresh.length && this.fresh[0].seq < p!.seq) {
      for (const r of this.fresh) this.keep(r.error, r.key);
      this.fresh = [];
      p!.reject(this.takeUnreported()!);
    } else if (error) p!.reject(error);
    else p!.resolve(f.fields);
  }

  private replyError(f: Frame, setKey?: string): StoreError {
    const message = `TcpStore: ${setKey !== undefined ? `set of key "${setKey}" refused: ` : ''}${f.fields[0]?.toString('utf8')}`;
    return f.fields[1]?.toString() === LIMIT_ERROR ? new StoreLimitError(message) : new StoreError(message);
  }

  private confirmBefore(seq: number): void {
    for (const [id, u] of this.unconfirmed) {
      if (u.seq >= seq) break;
      this.unconfirmed.delete(id);
    }
  }

  /**
   * Quiet sets were refused (those of one chunk, reported as one): the oldest get, wait, check or
   * count sent after the first fails with the refusal now (it may wait for the very key that was
   * not stored); with none in flight, the next operation or close() does. Requests that change
   * something are left to their answers.
   */
  private reportRefusedSets(): void {
    if (!this.fresh.length) return;
    const first = this.fresh[0];
    for (const r of this.fresh) this.keep(r.error, r.key);
    this.fresh = [];
    for (const [id, p] of this.pending) {
      if (p.seq < first.seq || !p.readOnly) continue;
      this.pending.delete(id);
      if (p.timer) clearTimeout(p.timer);
      p.reject(this.takeUnreported()!);
      return;
    }
  }

  /** Keeps a failure for the next operation: the first one, counting the keys of those after it. */
  private keep(error: StoreError, key?: string): void {
    const u = this.unreported;
    if (!u) this.unreported = { error, later: 0, keys: [] };
    else if (key !== undefined && u.keys.push(key) && ++u.later > 8) u.keys.length = 8;
  }

  /** The kept failure, once: one error for a whole run of refused sets. */
  private takeUnreported(): StoreError | undefined {
    const u = this.unreported;
    this.unreported = undefined;
    if (!u?.later) return u?.error;
    const more = `; ${u.later} later set(s) refused too: ${u.keys.join(', ')}${u.later > 8 ? ', ...' : ''}`;
    return new (u.error.constructor as typeof StoreError)(u.error.message + more);
  }

  /** The server refused this connection over a limit (too many connections). */
  private limitRefusal(message: string): StoreLimitError {
    return new StoreLimitError(`TcpStore: the store at ${this.host}:${this.port} refused this connection: ${message}`);
  }

  private refusal(reason: RefuseReason): AuthenticationError {
    const at = `${this.host}:${this.port}`;
    if (reason === RefuseReason.NoAuthentication) {
      return new AuthenticationError(`TcpStore: the store at ${at} requires a secret and this client has none (set CMESH_SECRET or pass secret)`);
    }
    if (reason === RefuseReason.ListenerHasNoSecret) {
      return new AuthenticationError(`TcpStore: this client has a secret but the store at ${at} has none; both ends must have the same one`);
    }
    return new AuthenticationError(`TcpStore: the store at ${at} refused this connection: ${refuseText(reason)} (both ends must have the same CMESH_SECRET)`);
  }

  /** The challenge (auth/handshake.ts), before any request; a refusal is final, not retried. */
  private authenticate(socket: net.Socket, key: Buffer, deadline: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const dialer = new AuthDialer(key, 'store');
      const done = (err?: Error) => {
        clearTimeout(timer);
        socket.off('close', onClose);
        if (err) {
          socket.destroy();
          reject(err);
        } else resolve();
      };
      const onData = (chunk: Buffer) => {
        const full = readConnectionRefusal(chunk);
        if (full !== undefined) return done(this.limitRefusal(full));
        const step = dialer.push(chunk);
        if (step.send) socket.write(step.send);
        if (step.state === 'done') done();
        else if (step.state === 'failed') {
          done(
            step.by === 'us'
              ? new AuthenticationError(`TcpStore: the store at ${this.host}:${this.port} could not prove the shared secret (secrets differ)`)
              : this.refusal(step.reason),
          );
        }
      };
      const onClose = () => done(new AuthenticationError(`TcpStore: the store at ${this.host}:${this.port} closed the connection during authentication`));
      const timer = setTimeout(
        () => done(new DistTimeoutError(`TcpStore: the store at ${this.host}:${this.port} did not complete authentication within ${this.timeoutMs} ms`)),
        timerMs(deadline - Date.now()),
      );
      this.onChunk = onData;
      socket.on('close', onClose);
      socket.once('error', () => undefined); // 'close' follows
      socket.write(dialer.hello());
    });
  }

  /** Waits for start-up, then sends one request; every request is bounded by a timeout. */
  private call(cmd: number, fields: Uint8Array[], timeoutMs = this.timeoutMs, what?: () => string): Promise<Buffer[]> {
    // connected, nothing to report: queued now, without a turn of the microtask queue per await
    if (this.usable()) return this.request(cmd, fields, timeoutMs, what);
    this.starting++;
    return this.ready_().then(
      () => {
        this.starting--;
        return this.request(cmd, fields, timeoutMs, what);
      },
      (err: Error) => {
        this.starting--;
        throw err;
      },
    );
  }

  /** Started, not closed, no call still waiting for start-up and no refusal to report. */
  private usable(): boolean {
    return this.up && !this.closed && this.starting === 0 && this.unreported === undefined;
  }

  /** Start-up done and nothing to report: else throws (a refused earlier set first). */
  private async ready_(): Promise<void> {
    if (this.closed) throw new StoreError(`TcpStore: store at ${this.host}:${this.port} is closed`);
    await this.started;
    const refused = this.takeUnreported();
    if (refused) throw refused;
  }

  /** Why no request can be sent, or undefined when one can. */
  private unusable(): Error | undefined {
    if (!this.closed && this.socket && !this.socket.destroyed && !this.lost) return undefined;
    return this.refused ?? this.lost ?? new StoreError(`TcpStore: store at ${this.host}:${this.port} is closed`);
  }

  /** `readOnly`: a refused set sent before it may fail it (see reportRefusedSet). */
  private request(
    cmd: number,
    fields: Uint8Array[],
    timeoutMs: number = this.timeoutMs,
    what?: () => string,
    readOnly = READ_ONLY.has(cmd),
  ): Promise<Buffer[]> {
    const down = this.unusable();
    if (down) return Promise.reject(down);
    const id = this.takeId();
    return new Promise<Buffer[]>((resolve, reject) => {
      const p: Pending = { resolve, reject, seq: ++this.seq, readOnly };
      p.timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new DistTimeoutError(`TcpStore: timed out after ${timeoutMs} ms waiting for ${what ? what() : `a reply from ${this.host}:${this.port}`}`));
      }, timerMs(timeoutMs));
      this.pending.set(id, p);
      this.send(encodeFrame(cmd, id, fields));
    });
  }

  private takeId(): number {
    const id = this.nextId;
    this.nextId = (this.nextId + 1) >>> 0 || 1;
    return id;
  }

  /** Queues a frame; the frames of one turn leave in one write at its end. */
  private send(frame: Buffer): void {
    this.outbox.push(frame);
    if (this.flushing) return;
    this.flushing = true;
    process.nextTick(this.flush);
  }

  private readonly flush = (): void => {
    this.flushing = false;
    const frames = this.outbox;
    this.outbox = [];
    if (frames.length && this.socket && !this.socket.destroyed) writeFrames(this.socket, frames);
  };

  /** One request whose answer confirms the quiet sets before it; a refusal among them is kept for the next operation. */
  private confirmSets(timeoutMs: number): Promise<unknown> {
    return this.request(Cmd.NUM_KEYS, [], timeoutMs, () => `the server to confirm ${this.unconfirmed.size} set(s)`, false).catch(() => undefined);
  }

  /**
   * Like torch's set, sent without waiting for an answer: resolves once queued. The server answers
   * only a refusal (a limit), which fails the next operation, or close(), naming the key.
   */
  async set(key: string, value: StoreValue): Promise<void> {
    checkKey(key);
    checkValue(value);
    const fields = [utf8(key), toBuffer(value)];
    if (!this.usable()) {
      this.starting++;
      try {
        await this.ready_();
      } finally {
        this.starting--; // and queued below in this same turn
      }
    }
    const down = this.unusable();
    if (down) throw down;
    const id = this.takeId();
    this.unconfirmed.set(id, { key, seq: ++this.seq });
    this.send(encodeFrame(Cmd.SET_QUIET, id, fields));
    // a client that only sets: one request now and then confirms the sets before it
    if (this.unconfirmed.size >= CONFIRM_EVERY) void this.confirmSets(this.timeoutMs);
  }

  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    checkKey(key);
    checkTimeout(timeoutMs);
    return (await this.call(Cmd.GET, [utf8(key)], timeoutMs, () => `key "${key}"`))[0];
  }

  async add(key: string, amount: number): Promise<number> {
    checkKey(key);
    checkAmount(amount);
    return readI64((await this.call(Cmd.ADD, [utf8(key), i64(amount)]))[0]);
  }

  async compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Buffer> {
    checkKey(key);
    checkValue(expected);
    checkValue(desired);
    return (await this.call(Cmd.COMPARE_SET, [utf8(key), toBuffer(expected), toBuffer(desired)]))[0];
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    checkKeys(keys);
    checkTimeout(timeoutMs);
    checkKeyCount(keys);
    if (keys.length === 0) return;
    await this.call(Cmd.WAIT, keys.map(utf8), timeoutMs, () => `keys [${keys.join(', ')}]`).catch(async (err) => {
      if (!(err instanceof DistTimeoutError)) throw err;
      const missing: string[] = [];
      for (const k of keys) if (!(await this.check([k]))) missing.push(k);
      throw new DistTimeoutError(`TcpStore: timed out after ${timeoutMs} ms waiting for keys [${missing.join(', ')}]`);
    });
  }

  async check(keys: string[]): Promise<boolean> {
    checkKeys(keys);
    checkKeyCount(keys);
    return (await this.call(Cmd.CHECK, keys.map(utf8)))[0][0] === 1;
  }

  async deleteKey(key: string): Promise<boolean> {
    checkKey(key);
    return (await this.call(Cmd.DELETE, [utf8(key)]))[0][0] === 1;
  }

  async numKeys(): Promise<number> {
    return readI64((await this.call(Cmd.NUM_KEYS, []))[0]);
  }

  /**
   * Closes the connection (and the server, on the master). Sets not yet confirmed are confirmed
   * first, waiting up to 10 s (or the store's timeout, if shorter): a refused set throws here, after
   * closing, if no operation reported it.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    let unconfirmed: Error | undefined;
    if (this.unconfirmed.size && !this.unusable()) {
      const n = this.unconfirmed.size;
      // a timeout, or the connection lost (naming the sets): either way the sets are not known stored
      await this.request(Cmd.NUM_KEYS, [], Math.min(this.timeoutMs, CLOSE_CONFIRM_MS), () => `the server to confirm the last ${n} set(s)`, false).catch(
        (e: Error) => {
          unconfirmed = e;
        },
      );
    }
    this.closed = true;
    this.flush();
    this.socket?.destroy();
    await this.server?.close();
    const refused = this.takeUnreported() ?? unconfirmed;
    if (refused) throw refused;
  }
}

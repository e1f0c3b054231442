// TcpStore: c10d's TCPStore. The master hosts the server in-process; every rank (the master too)
// talks to it through one client connection with pipelined requests.
import * as net from 'net';
import { AuthenticationError, DistTimeoutError, InvalidArgumentError, StoreError, StoreLimitError } from '../errors';
import { AUTH_MAGIC, AuthDialer, readRefusal, refuseText, RefuseReason } from '../auth/handshake';
import { resolveSecret } from '../auth/secret';
import { Cmd, encodeFrame, Frame, FrameDecoder, i64, LIMIT_ERROR, MalformedFrameError, readConnectionRefusal, readI64, REPLY_ERROR, utf8 } from './frame-codec';
import { Store, StoreValue, toBuffer } from './store';
import { TcpStoreLimits, TcpStoreServer } from './tcp-store-server';
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
}

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
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private readonly started: Promise<void>;
  readonly worldSize?: number;
  private readonly key?: Buffer;
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
    this.started.catch(() => {}); // reported by ready() and by every operation
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
          const s = net.connect({ host: this.host, port: this.port }, () => resolve(s));
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
      throw new DistTimeoutError(
        `TcpStore: could not connect to ${this.host}:${this.port} within ${this.timeoutMs} ms (${lastError?.message ?? 'timeout'})`,
      );
    }
    const socket = this.socket;
    socket.setNoDelay(true);
    if (this.key) await this.authenticate(socket, this.key, deadline);
    socket.removeAllListeners('error');
    const decoder = new FrameDecoder();
    let first = true;
    socket.on('data', (chunk) => {
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
        frames = decoder.push(chunk);
      } catch (err) {
        // the replies before the malformed frame are good; then the stream is not a store's
        frames = err instanceof MalformedFrameError ? err.frames : [];
        malformed = err as Error;
      }
      for (const f of frames) {
        const p = this.pending.get(f.id);
        if (!p) continue; // timed out earlier
        this.pending.delete(f.id);
        if (p.timer) clearTimeout(p.timer);
        if (f.tag === REPLY_ERROR) {
          const message = `TcpStore: ${f.fields[0]?.toString('utf8')}`;
          p.reject(f.fields[1]?.toString() === LIMIT_ERROR ? new StoreLimitError(message) : new StoreError(message));
        }
        else p.resolve(f.fields);
      }
      if (malformed) socket.destroy(malformed); // not a store server: fails every pending request
    });
    const fail = (err?: Error) => {
      const e = this.refused ?? new StoreError(`TcpStore: connection to ${this.host}:${this.port} lost${err ? `: ${err.message}` : ''}`);
      for (const p of this.pending.values()) {
        if (p.timer) clearTimeout(p.timer);
        p.reject(e);
      }
      this.pending.clear();
    };
    socket.on('error', fail);
    socket.on('close', () => fail());
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
        socket.off('data', onData);
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
      socket.on('data', onData);
      socket.on('close', onClose);
      socket.once('error', () => undefined); // 'close' follows
      socket.write(dialer.hello());
    });
  }

  /** Waits for start-up, then sends one request; every request is bounded by a timeout. */
  private async call(cmd: number, fields: Uint8Array[], timeoutMs = this.timeoutMs, what?: () => string): Promise<Buffer[]> {
    if (this.closed) throw new StoreError(`TcpStore: store at ${this.host}:${this.port} is closed`);
    await this.started;
    return this.request(cmd, fields, timeoutMs, what);
  }

  private request(cmd: number, fields: Uint8Array[], timeoutMs: number = this.timeoutMs, what?: () => string): Promise<Buffer[]> {
    if (this.closed || !this.socket || this.socket.destroyed) {
      if (this.refused) return Promise.reject(this.refused);
      return Promise.reject(new StoreError(`TcpStore: store at ${this.host}:${this.port} is closed`));
    }
    const id = this.nextId;
    this.nextId = (this.nextId + 1) >>> 0 || 1;
    return new Promise<Buffer[]>((resolve, reject) => {
      const p: Pending = { resolve, reject };
      p.timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new DistTimeoutError(`TcpStore: timed out after ${timeoutMs} ms waiting for ${what ? what() : `a reply from ${this.host}:${this.port}`}`));
      }, timerMs(timeoutMs));
      this.pending.set(id, p);
      this.socket!.write(encodeFrame(cmd, id, fields));
    });
  }

  async set(key: string, value: StoreValue): Promise<void> {
    checkKey(key);
    checkValue(value);
    await this.call(Cmd.SET, [utf8(key), toBuffer(value)]);
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

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.socket?.destroy();
    await this.server?.close();
  }
}

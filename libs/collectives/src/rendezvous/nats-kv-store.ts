// A c10d Store on a NATS JetStream KV bucket (one bucket per job): the library's nats:// init
// method, and the store of jobs that the coordinator dispatches. The NATS client (@nats-io/*) is
// loaded lazily so the library core does not depend on it.
import { DistTimeoutError, InvalidArgumentError, NatsConnectionLostError, StoreError } from '../errors';
import { Store, StoreValue, toBuffer } from '../store/store';
import { checkAmount, checkKey, checkKeys, checkTimeout, checkValue } from '../store/validate';
import { DEFAULT_STORE_TIMEOUT_MS } from '../store/tcp-store';
import { natsLogin } from './nats-credentials';
import { NatsKvClient, isTransientNatsError, loadNatsKv } from './nats-client';
import { ConnectionWatch, NATS_RECONNECT, natsServers, watchConnection } from './nats-reconnect';
import { NATS_REPLICAS_ENV, configuredReplicas, natsReplicas } from './nats-replicas';
import { parseStoreBucket, storesOpenSubject } from './store-names';
import { setTimeout as sleep } from 'timers/promises';

/** A key the watch saw but a lagging replica does not have yet: read again, 20 times 50 ms at most. */
const STALE_READ_RETRIES = 20;
const STALE_READ_DELAY_MS = 50;

/* eslint-disable @typescript-eslint/no-explicit-any */
type KV = any;
type NatsConnection = any;

const VALID = /^[-/_=.a-zA-Z0-9]+$/;

/** KV keys allow [-/_=.a-zA-Z0-9] and no leading/trailing dot: other keys are hex-encoded. */
function kvKey(key: string): string {
  return VALID.test(key) && !key.startsWith('.') && !key.endsWith('.') ? `k.${key}` : `x.${Buffer.from(key).toString('hex')}`;
}

function loadNats(): NatsKvClient {
  return loadNatsKv('the nats:// init method', (m) => new StoreError(m));
}

/** Thrown by withDeadline when the deadline passes before `p` settles. */
class DeadlinePassed extends Error {
  override name = 'TimeoutError';
}

/** `p`, or a DeadlinePassed at `deadline` (a JetStream request's own timeout may end later). */
async function withDeadline<T>(p: Promise<T>, deadline: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new DeadlinePassed('deadline passed')), Math.max(0, deadline - Date.now())))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The coordinator refused to create a store bucket (a name not of its cluster's store pattern). */
export class StoreRefusedError extends StoreError {}

/**
 * Asks the coordinator to create a store bucket: true once it did (or it existed), false where
 * nobody answers (503 no responders) or this login may not ask; its refusal: StoreRefusedError.
 */
async function askToCreate(nc: NatsConnection, subject: string, bucket: string, timeoutMs: number): Promise<boolean> {
  let msg;
  try {
    msg = await nc.request(subject, Buffer.from(JSON.stringify({ bucket })), { timeout: Math.min(timeoutMs, 5000), noMux: true });
  } catch (e) {
    // no responders, or a permission violation (a RequestError whose cause names it)
    const cause = (e as { cause?: { name?: string } }).cause?.name;
    if ((e as Error).name === 'NoResponders' || cause === 'NoResponders' || cause === 'PermissionViolationError') return false;
    throw e; // a timeout: the caller retries until its deadline
  }
  let reply: { ok?: boolean; error?: { code?: string; message?: string } };
  try {
    reply = JSON.parse(Buffer.from(msg.data).toString());
  } catch {
    throw new StoreRefusedError(`store bucket ${bucket}: the coordinator's answer is not JSON`);
  }
  if (reply?.ok === true) return true;
  throw new StoreRefusedError(
    `store bucket ${bucket}: the coordinator refused to create it (${reply?.error?.code ?? '?'}: ${reply?.error?.message ?? 'no reason given'})`,
  );
}

/**
 * No server took the connection: refused, timed out, or reset or closed before the handshake
 * ended (a server killed while it answered). A login or TLS refusal is not: that is final.
 */
function unreachable(e: unknown): boolean {
  const { name, code, message } = e as { name?: string; code?: string; message?: string };
  return (
    name === 'TimeoutError' ||
    /ECONNREFUSED|ECONNRESET|ECONNABORTED|EPIPE|EHOSTUNREACH|ENETUNREACH|CONNECTION_REFUSED|connection refused|error connecting|timeout/i.test(
      `${code} ${message}`,
    )
  );
}

/**
 * Connects, trying again while no server answers (one restarting, a cluster's failover) until
 * `deadline`; then NatsConnectionLostError naming the servers. Each try fails fast (refused):
 * nothing keeps trying after the caller gave up.
 */
async function connectUntil(nats: NatsKvClient, servers: string | undefined, deadline: number): Promise<NatsConnection> {
  const list = servers ? natsServers(servers) : undefined;
  const started = Date.now();
  for (let delay = 100; ; delay = Math.min(delay * 2, 1000)) {
    try {
      return await nats.transport.connect({
        ...natsLogin(),
        ...NATS_RECONNECT,
        servers: list,
        timeout: Math.max(1000, Math.min(10_000, deadline - Date.now())),
        name: 'cmesh-store',
      });
    } catch (e) {
      if (!unreachable(e)) throw e;
      if (Date.now() >= deadline) {
        const tried = list ?? ['nats://127.0.0.1:4222'];
        throw new NatsConnectionLostError(
          `NatsKvStore: cannot connect to ${tried.join(', ')}: no server answered for ${((Date.now() - started) / 1000).toFixed(1)} s`,
          tried,
          Date.now() - started,
        );
      }
      await sleep(Math.min(delay, Math.max(1, deadline - Date.now())));
    }
  }
}

export class NatsKvStore implements Store {
  timeoutMs: number;
  /**
   * Only clients the NATS server admits reach the bucket: a data-plane secret kept here is as
   * private as the store (initProcessGroup makes one when none is given).
   */
  readonly keepsSecrets = true;

  /** The bucket's name: a data-plane secret derived for it differs from every other store's. */
  get bucket(): string {
    return (this.kv as unknown as { bucket: string }).bucket;
  }

  private readonly conn: ConnectionWatch;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    private readonly ownsConnection: boolean,
    timeoutMs?: number,
  ) {
    this.timeoutMs = timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.conn = watchConnection(nc);
  }

  /**
   * `fn` again after a transient error (JetStream's 503 while a stream is created or elected, a
   * timeout while NATS is away and the client reconnects) until `deadline`; then the error, or
   * NatsConnectionLostError when the connection is down.
   */
  private async retry<T>(what: string, fn: () => Promise<T>, deadline = Date.now() + this.timeoutMs): Promise<T> {
    for (let delay = 10; ; delay = Math.min(delay * 2, 500)) {
      try {
        return await withDeadline(fn(), deadline);
      } catch (err) {
        if (!isTransientNatsError(err)) throw err;
        if (Date.now() + delay >= deadline)
          throw (
            this.conn.lost(`NatsKvStore ${this.bucket}: ${what}`) ??
            (err instanceof DeadlinePassed ? new DistTimeoutError(`NatsKvStore ${this.bucket}: ${what}: no answer within the deadline`) : err)
          );
        await sleep(delay);
      }
    }
  }

  /**
   * Connects (or uses `connection`) and binds to the job's bucket. A missing store bucket
   * (parseStoreBucket) is created by the cluster's coordinator (`<prefix>.stores.open`: only it may
   * create streams where logins are enforced); where nobody answers (no coordinator on a bare
   * nats-server), and for any other bucket name, this client creates it itself.
   */
  static async open(opts: { servers?: string; connection?: NatsConnection; bucket: string; timeoutMs?: number }): Promise<NatsKvStore> {
    if (!/^[A-Za-z0-9_-]+$/.test(opts.bucket)) throw new InvalidArgumentError(`invalid KV bucket name ${JSON.stringify(opts.bucket)}`);
    const nats = loadNats();
    const kvm = (nc: NatsConnection) => new nats.kv.Kvm(nc);
    // ranks open the job's bucket at once: JetStream may answer 503 while another creates it, or
    // time out while a restarted server's streams elect their leaders (up to ~9 s, each call 5 s)
    const deadline = Date.now() + Math.min(opts.timeoutMs ?? 20_000, 20_000);
    const nc = opts.connection ?? (await connectUntil(nats, opts.servers, deadline));
    watchConnection(nc);
    const store = parseStoreBucket(opts.bucket);
    let asked = false;
    for (let delay = 10; ; delay = Math.min(delay * 2, 500)) {
      try {
        const jsm = await nats.jetstream.jetstreamManager(nc);
        const info = await jsm.streams.info(`KV_${opts.bucket}`).catch((e: Error) => {
          if (e instanceof nats.jetstream.JetStreamApiError && e.code === nats.jetstream.JetStreamApiCodes.StreamNotFound) return null;
          throw e;
        });
        if (info) {
          const kv = await kvm(nc).open(opts.bucket, { bindOnly: true, allow_direct: info.config.allow_direct === true });
          return new NatsKvStore(nc, kv, !opts.connection, opts.timeoutMs);
        }
        // missing: the coordinator creates it (once); nobody there to answer: create it here
        if (store && !asked) {
          asked = true;
          const answered = await askToCreate(nc, storesOpenSubject(store.cluster), opts.bucket, Math.max(1, deadline - Date.now()));
          if (answered) continue;
        }
        // as the coordinator would make it: CMESH_NATS_REPLICAS, else min(3, the cluster's servers)
        const { replicas } = await natsReplicas(nc, configuredReplicas(process.env[NATS_REPLICAS_ENV]));
        const kv = await kvm(nc).create(opts.bucket, { history: 1, replicas });
        return new NatsKvStore(nc, kv, !opts.connection, opts.timeoutMs);
      } catch (err) {
        if (err instanceof StoreRefusedError || Date.now() + delay > deadline) {
          if (!opts.connection) await nc.close();
          throw err instanceof StoreRefusedError ? err : new StoreError(`cannot open JetStream KV bucket ${opts.bucket}: ${(err as Error).message}`);
        }
        await sleep(delay);
      }
    }
  }

  private async entry(key: string, deadline?: number): Promise<{ value: Buffer; revision: number } | undefined> {
    const e = await this.retry<any>(`get ${key}`, () => this.kv.get(kvKey(key)), deadline);
    if (!e || e.operation !== 'PUT') return undefined;
    return { value: Buffer.from(e.value), revision: e.revision };
  }

  async set(key: string, value: StoreValue): Promise<void> {
    checkKey(key);
    checkValue(value);
    await this.retry(`set ${key}`, () => this.kv.put(kvKey(key), toBuffer(value)));
  }

  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    checkKey(key);
    await this.wait([key], timeoutMs);
    // a bucket of several replicas answers reads from any of them (direct get): one a write has
    // not reached yet answers "no such key" for a moment after the watch saw it
    let e = await this.entry(key);
    for (let i = 0; !e && i < STALE_READ_RETRIES; i++) {
      await sleep(STALE_READ_DELAY_MS);
      e = await this.entry(key);
    }
    if (!e) throw new StoreError(`key ${key} was deleted while being read`);
    return e.value;
  }

  /** Optimistic concurrency: create or update at the revision read, retry on conflict. */
  private async cas<T>(key: string, fn: (cur: Buffer | undefined) => { write?: Buffer; result: T }): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; attempt < 1000; attempt++) {
      const cur = await this.entry(key, deadline);
      const { write, result } = fn(cur?.value);
      if (write === undefined) return result;
      try {
        if (cur) await withDeadline(this.kv.update(kvKey(key), write, cur.revision), deadline);
        else await withDeadline(this.kv.create(kvKey(key), write), deadline);
        return result;
      } catch (err) {
        // a timeout: NATS is away, or the write was answered too late (read again: it may have been stored)
        if (isTransientNatsError(err) && Date.now() >= deadline) throw this.conn.lost(`NatsKvStore ${this.bucket}: update ${key}`) ?? err;
        await sleep(isTransientNatsError(err) ? 50 : Math.random() * 3); // lost the race: read again
      }
    }
    throw new StoreError(`too much contention on key ${key}`);
  }

  async add(key: string, amount: number): Promise<number> {
    checkKey(key);
    checkAmount(amount);
    return this.cas(key, (cur) => {
      const n = (cur ? Number(cur.toString()) : 0) + amount;
      if (!Number.isFinite(n)) throw new StoreError(`key ${key} does not hold an integer`);
      return { write: Buffer.from(String(n)), result: n };
    });
  }

  async compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Buffer> {
    checkKey(key);
    checkValue(expected);
    checkValue(desired);
    const exp = toBuffer(expected);
    const want = Buffer.from(toBuffer(desired));
    return this.cas(key, (cur) => {
      if ((cur === undefined && exp.length === 0) || (cur !== undefined && cur.equals(exp))) return { write: want, result: want };
      return { result: cur ?? Buffer.from(exp) };
    });
  }

  /** Whether `key` is set; false where NATS did not answer by `deadline` (wait's loop then says why). */
  private async present(key: string, deadline: number): Promise<boolean> {
    try {
      return (await this.entry(key, deadline)) !== undefined;
    } catch (e) {
      if (isTransientNatsError(e) || e instanceof NatsConnectionLostError || e instanceof DistTimeoutError) return false;
      throw e;
    }
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    checkKeys(keys);
    checkTimeout(timeoutMs);
    const deadline = Date.now() + timeoutMs;
    let delay = 2;
    let missing = keys;
    for (;;) {
      const present = await Promise.all(missing.map((k) => this.present(k, deadline)));
      missing = missing.filter((_, i) => !present[i]);
      if (!missing.length) return;
      if (Date.now() >= deadline)
        throw (
          this.conn.lost(`NatsKvStore: waiting for keys [${missing.join(', ')}] for ${timeoutMs} ms`) ??
          new DistTimeoutError(`NatsKvStore: timed out after ${timeoutMs} ms waiting for keys [${missing.join(', ')}]`)
        );
      await sleep(Math.min(delay, Math.max(1, deadline - Date.now())));
      delay = Math.min(delay * 2, 50);
    }
  }

  async check(keys: string[]): Promise<boolean> {
    checkKeys(keys);
    for (const k of keys) if (!(await this.entry(k))) return false;
    return true;
  }

  async deleteKey(key: string): Promise<boolean> {
    checkKey(key);
    if (!(await this.entry(key))) return false;
    await this.retry(`delete ${key}`, () => this.kv.delete(kvKey(key)));
    return true;
  }

  async numKeys(): Promise<number> {
    let n = 0;
    for await (const _ of await this.kv.keys()) n++;
    return n;
  }

  /** Deletes the whole bucket (the job is over); the store cannot be used afterwards. */
  async destroy(): Promise<void> {
    await this.kv.destroy();
  }

  async close(): Promise<void> {
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.close();
  }
}

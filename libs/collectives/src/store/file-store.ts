// FileStore: a store in one shared file, usable by processes that share a filesystem (c10d's
// FileStore). Every mutation takes an exclusive lock file (O_EXCL), reads the map and writes it
// back atomically (write + rename), so concurrent add() across processes is exact and readers
// without the lock always see a whole snapshot.
import * as fs from 'fs';
import * as os from 'os';
import { DistTimeoutError, InvalidArgumentError, StoreError } from '../errors';
import { Store, StoreValue, toBuffer } from './store';
import { DEFAULT_STORE_TIMEOUT_MS } from './tcp-store';
import { checkAmount, checkKey, checkKeys, checkTimeout, checkValue } from './validate';
import { setTimeout as sleep } from 'timers/promises';

const POLL_MS = 5;
/** A lock older than this is left over by a holder that died (operations take microseconds). */
const STALE_LOCK_MS = 10_000;

/** File layout: keys (values base64) plus the count of closed handles for worldSize clean-up. */
interface FileData {
  keys: Record<string, string>;
  closed?: number;
}

export interface FileStoreOptions {
  /** torch's world_size: once this many handles have closed, the file is removed. */
  worldSize?: number;
  timeoutMs?: number;
}

export class FileStore implements Store {
  timeoutMs: number;
  readonly worldSize?: number;
  private readonly lockPath: string;
  private closed = false;

  /** `new FileStore(path, worldSize?)` like torch, or `new FileStore(path, { worldSize?, timeoutMs? })`. */
  constructor(
    readonly path: string,
    worldSizeOrOpts?: number | FileStoreOptions,
    opts: FileStoreOptions = {},
  ) {
    if (typeof path !== 'string' || !path) throw new InvalidArgumentError(`FileStore: path must be a non-empty string, got ${JSON.stringify(path)}`);
    const o = typeof worldSizeOrOpts === 'object' && worldSizeOrOpts !== null ? worldSizeOrOpts : { ...opts, worldSize: worldSizeOrOpts };
    // torch uses world_size = -1 for "unknown": no clean-up
    if (o.worldSize !== undefined && o.worldSize !== -1 && (!Number.isInteger(o.worldSize) || o.worldSize < 1)) {
      throw new InvalidArgumentError(`FileStore: worldSize must be an integer >= 1 (or -1), got ${JSON.stringify(o.worldSize)}`);
    }
    if (o.timeoutMs !== undefined) checkTimeout(o.timeoutMs);
    this.worldSize = o.worldSize === -1 ? undefined : o.worldSize;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.lockPath = `${path}.lock`;
  }

  private read(): FileData {
    let text: string;
    try {
      text = fs.readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { keys: {} };
      throw new StoreError(`FileStore: cannot read ${this.path}: ${(err as Error).message}`);
    }
    try {
      const d = JSON.parse(text) as FileData;
      if (typeof d !== 'object' || d === null || typeof d.keys !== 'object') throw new Error('not a FileStore file');
      return d;
    } catch (err) {
      throw new StoreError(`FileStore: ${this.path} is not a cmesh FileStore file (${(err as Error).message})`);
    }
  }

  private write(data: FileData): void {
    const tmp = `${this.path}.${os.hostname()}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(data));
    fs.renameSync(tmp, this.path);
  }

  /** Breaks a lock whose holder died: same host and its pid is gone, or clearly stale. */
  private breakStaleLock(): void {
    try {
      const [host, pid] = fs.readFileSync(this.lockPath, 'utf8').split(':');
      let dead = false;
      if (host === os.hostname() && Number(pid) > 0) {
        try {
          process.kill(Number(pid), 0);
        } catch (err) {
          dead = (err as NodeJS.ErrnoException).code === 'ESRCH';
        }
      }
      if (dead || Date.now() - fs.statSync(this.lockPath).mtimeMs > STALE_LOCK_MS) fs.rmSync(this.lockPath, { force: true });
    } catch {
      /* the lock vanished meanwhile */
    }
  }

  private async locked<T>(fn: (data: FileData) => T): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        const fd = fs.openSync(this.lockPath, 'wx');
        fs.writeSync(fd, `${os.hostname()}:${process.pid}`);
        fs.closeSync(fd);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new StoreError(`FileStore: cannot lock ${this.lockPath}: ${(err as Error).message}`);
        if (attempt % 50 === 49) this.breakStaleLock();
        if (Date.now() > deadline) throw new DistTimeoutError(`FileStore: could not lock ${this.lockPath} within ${this.timeoutMs} ms`);
        await sleep(1);
      }
    }
    try {
      return fn(this.read());
    } finally {
      fs.rmSync(this.lockPath, { force: true });
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreError(`FileStore: store at ${this.path} is closed`);
  }

  async set(key: string, value: StoreValue): Promise<void> {
    checkKey(key);
    checkValue(value);
    this.checkOpen();
    const encoded = toBuffer(value).toString('base64');
    await this.locked((d) => {
      d.keys[key] = encoded;
      this.write(d);
    });
  }

  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    checkKey(key);
    checkTimeout(timeoutMs);
    this.checkOpen();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = this.read().keys[key];
      if (v !== undefined) return Buffer.from(v, 'base64');
      if (Date.now() >= deadline) throw new DistTimeoutError(`FileStore: timed out after ${timeoutMs} ms waiting for key "${key}"`);
      await sleep(POLL_MS);
    }
  }

  async add(key: string, amount: number): Promise<number> {
    checkKey(key);
    checkAmount(amount);
    this.checkOpen();
    return this.locked((d) => {
      const cur = d.keys[key] === undefined ? 0 : Number(Buffer.from(d.keys[key], 'base64').toString('utf8'));
      if (!Number.isSafeInteger(cur)) throw new StoreError(`FileStore: key ${key} does not hold an integer`);
      d.keys[key] = Buffer.from(String(cur + amount)).toString('base64');
      this.write(d);
      return cur + amount;
    });
  }

  async compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Buffer> {
    checkKey(key);
    checkValue(expected);
    checkValue(desired);
    this.checkOpen();
    const exp = Buffer.from(toBuffer(expected));
    const want = Buffer.from(toBuffer(desired));
    return this.locked((d) => {
      const cur = d.keys[key] === undefined ? undefined : Buffer.from(d.keys[key], 'base64');
      if ((cur === undefined && exp.length === 0) || (cur !== undefined && cur.equals(exp))) {
        d.keys[key] = want.toString('base64');
        this.write(d);
        return want;
      }
      return cur ?? exp;
    });
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    checkKeys(keys);
    checkTimeout(timeoutMs);
    this.checkOpen();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const d = this.read();
      const missing = keys.filter((k) => d.keys[k] === undefined);
      if (!missing.length) return;
      if (Date.now() >= deadline) {
        throw new DistTimeoutError(`FileStore: timed out after ${timeoutMs} ms waiting for keys [${missing.join(', ')}]`);
      }
      await sleep(POLL_MS);
    }
  }

  async check(keys: string[]): Promise<boolean> {
    checkKeys(keys);
    this.checkOpen();
    const d = this.read();
    return keys.every((k) => d.keys[k] !== undefined);
  }

  async deleteKey(key: string): Promise<boolean> {
    checkKey(key);
    this.checkOpen();
    return this.locked((d) => {
      if (d.keys[key] === undefined) return false;
      delete d.keys[key];
      this.write(d);
      return true;
    });
  }

  async numKeys(): Promise<number> {
    this.checkOpen();
    return Object.keys(this.read().keys).length;
  }

  /** With worldSize, the last of worldSize handles to close removes the file (torch's clean-up). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.worldSize === undefined) return;
    await this.locked((d) => {
      d.closed = (d.closed ?? 0) + 1;
      if (d.closed >= this.worldSize!) fs.rmSync(this.path, { force: true });
      else this.write(d);
    });
  }
}

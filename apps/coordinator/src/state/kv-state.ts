// The coordinator's whole state: JSON records in one JetStream KV bucket per cluster. Updates are
// compare-and-set on the revision read, so replicas (and a restarted coordinator) never lose or
// overwrite each other's changes.
import { JSONCodec, KV } from 'nats';
import { kvKeys } from './kv-keys';

const json = JSONCodec();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class ConflictError extends Error {}

export class KvState {
  constructor(readonly kv: KV) {}

  async get<T>(key: string): Promise<T | undefined> {
    const e = await this.kv.get(key);
    return e && e.operation === 'PUT' ? (json.decode(e.value) as T) : undefined;
  }

  async put<T>(key: string, value: T): Promise<void> {
    await this.kv.put(key, json.encode(value));
  }

  /** Writes `value` only if `key` has none: false when it has (another writer was first). */
  async create<T>(key: string, value: T): Promise<boolean> {
    try {
      await this.kv.create(key, json.encode(value));
      return true;
    } catch {
      return false;
    }
  }

  async delete(key: string): Promise<void> {
    await this.kv.delete(key);
  }

  /**
   * Read-modify-write with optimistic concurrency: `fn` gets the current value (undefined when
   * missing) and returns the new one, or undefined to leave it; retried when another writer won.
   */
  async update<T>(key: string, fn: (cur: T | undefined) => T | undefined): Promise<T | undefined> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const e = await this.kv.get(key);
      const cur = e && e.operation === 'PUT' ? (json.decode(e.value) as T) : undefined;
      const next = fn(cur);
      if (next === undefined) return cur;
      try {
        if (e && e.operation === 'PUT') await this.kv.update(key, json.encode(next), e.revision);
        else if (e) await this.kv.update(key, json.encode(next), e.revision);
        else await this.kv.create(key, json.encode(next));
        return next;
      } catch {
        await sleep(Math.random() * 5);
      }
    }
    throw new ConflictError(`too much contention on ${key}`);
  }

  async list<T>(prefix: string): Promise<T[]> {
    const out: T[] = [];
    for (const k of (await kvKeys(this.kv, `${prefix}>`)).sort()) {
      const v = await this.get<T>(k);
      if (v !== undefined) out.push(v);
    }
    return out;
  }
}

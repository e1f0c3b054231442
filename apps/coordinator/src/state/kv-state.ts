// The coordinator's whole state: JSON records in one JetStream KV bucket per cluster. Updates are
// compare-and-set on the revision read, so replicas (and a restarted coordinator) never lose or
// overwrite each other's changes. A record read back that is not JSON or does not fit its kind's
// schema is skipped as missing (kv-records.ts): an update overwrites it.
import type { NatsConnection } from '@nats-io/nats-core';
import { KV, KvEntry, KvOptions } from '@nats-io/kv';
import { z } from 'zod';
import { createKv } from '../nats/bucket-replicas';
import { KvStream } from './kv-keys';
import { RecordCheck } from './kv-records';
import { setTimeout as sleep } from 'timers/promises';

class ConflictError extends Error {}

export class KvState {
  constructor(
    readonly kv: KV,
    /** the bucket's stream: its key listing */
    readonly stream: KvStream,
    /** where skipped records are counted and logged */
    readonly records: RecordCheck = new RecordCheck(stream.bucket),
    /** the schema of a key's record (default: any JSON) */
    private readonly schemaOf: (key: string) => z.ZodTypeAny = () => z.unknown(),
  ) {}

  /** The bucket, made with the mesh's replica count if it is not there yet (createKv). */
  static async open(
    nc: NatsConnection,
    bucket: string,
    opts: Partial<KvOptions>,
    records?: RecordCheck,
    schemaOf?: (key: string) => z.ZodTypeAny,
  ): Promise<KvState> {
    return new KvState(await createKv(nc, bucket, opts), await KvStream.of(nc, bucket), records, schemaOf);
  }

  /** A watched or read entry's record: undefined when deleted, or not valid (skipped). */
  decode<T>(e: KvEntry | null): T | undefined {
    if (!e || e.operation !== 'PUT') return undefined;
    return this.records.decode(e.key, e.value, this.schemaOf(e.key)) as T | undefined;
  }

  async get<T>(key: string): Promise<T | undefined> {
    return this.decode<T>(await this.kv.get(key));
  }

  async put<T>(key: string, value: T): Promise<void> {
    await this.kv.put(key, JSON.stringify(value));
  }

  /** Writes `value` only if `key` has none: false when it has (another writer was first). */
  async create<T>(key: string, value: T): Promise<boolean> {
    try {
      await this.kv.create(key, JSON.stringify(value));
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
      // a record that is not valid counts as missing: the update replaces it
      const cur = this.decode<T>(e);
      const next = fn(cur);
      if (next === undefined) return cur;
      try {
        if (e && e.operation === 'PUT') await this.kv.update(key, JSON.stringify(next), e.revision);
        else if (e) await this.kv.update(key, JSON.stringify(next), e.revision);
        else await this.kv.create(key, JSON.stringify(next));
        return next;
      } catch {
        await sleep(Math.random() * 5);
      }
    }
    throw new ConflictError(`too much contention on ${key}`);
  }

  async list<T>(prefix: string): Promise<T[]> {
    const out: T[] = [];
    for (const k of (await this.stream.keys(`${prefix}>`)).sort()) {
      const v = await this.get<T>(k);
      if (v !== undefined) out.push(v);
    }
    return out;
  }
}

// Job records in JetStream KV (bucket `cmesh_jobs`, one key per job), so results outlive the
// coordinator process; a recent-first index in memory serves the list.
import { JSONCodec, KV, NatsConnection } from 'nats';
import { JobRecord } from '@cmesh/protocol';
import { kvKeys } from '../state/kv-keys';

const json = JSONCodec<JobRecord>();
export const JOBS_BUCKET = 'cmesh_jobs';
/** Records kept; older ones are deleted from KV as new ones arrive. */
export const JOBS_KEPT = 200;

export class JobStore {
  private kv: KV | null = null;
  private order: string[] = [];
  /** latest record per id, written or not yet: reads never see an older state than the service */
  private readonly cache = new Map<string, JobRecord>();
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly nc: NatsConnection) {}

  async open(): Promise<void> {
    this.kv = await this.nc.jetstream().views.kv(JOBS_BUCKET, { history: 1 });
    const keys = await kvKeys(this.kv);
    const recs = (await Promise.all(keys.map((k) => this.read(k)))).filter((r): r is JobRecord => !!r);
    this.order = recs.sort((a, b) => a.createdAt.localeCompare(b.createdAt)).map((r) => r.id);
  }

  async read(id: string): Promise<JobRecord | null> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    if (!this.kv || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return null;
    const e = await this.kv.get(id);
    return e && e.operation === 'PUT' && e.value.length ? json.decode(e.value) : null;
  }

  /** Writes are serialised so KV never ends with an older state of a job. */
  write(rec: JobRecord): Promise<void> {
    const kv = this.kv;
    if (!kv) return Promise.reject(new Error('job store is not open'));
    const snapshot = json.encode(rec);
    this.cache.set(rec.id, rec);
    const evicted: string[] = [];
    if (!this.order.includes(rec.id)) {
      this.order.push(rec.id);
      while (this.order.length > JOBS_KEPT) evicted.push(this.order.shift()!);
    }
    for (const id of evicted) this.cache.delete(id);
    const next = this.chain.then(async () => {
      for (const id of evicted) await kv.delete(id).catch(() => undefined);
      await kv.put(rec.id, snapshot);
    });
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Every job id in KV, this replica's and the others'. */
  async keys(): Promise<string[]> {
    return this.kv ? kvKeys(this.kv) : [];
  }

  /** Most recent first. */
  recentIds(limit: number): string[] {
    return this.order.slice(-limit).reverse();
  }
}

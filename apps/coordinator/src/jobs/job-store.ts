// Job records in JetStream KV (the cluster's jobs bucket, `cmesh_jobs` in the default cluster, one key per job), so results outlive the
// coordinator process; a recent-first index in memory serves the list.
//
// Retention has two bounds, enforced in memory and in the bucket alike: the newest `kept`
// records (older ones are purged as new ones arrive), and `maxAgeMs` since a record was last
// written (the bucket's max_age, which the server enforces; the index forgets them too). A
// record is removed by purging its subject, which leaves no delete marker behind: a marker per
// finished job would grow the stream without bound, and every key listing would read it.
import { NatsConnection, nanos } from '@nats-io/nats-core';
import { KV } from '@nats-io/kv';
import { createKv } from '../nats/bucket-replicas';
import { JobRecord, JobRecordSchema, isFinished } from '@cmesh/protocol';
import { KvStream } from '../state/kv-keys';
import { RecordCheck } from '../state/kv-records';

export interface JobRetention {
  /** records kept, newest first */
  kept: number;
  /** a record not written for this long is dropped */
  maxAgeMs: number;
}
const DEFAULT_JOB_RETENTION: JobRetention = { kept: 200, maxAgeMs: 7 * 24 * 3600_000 };

export class JobStore {
  private kv: KV | null = null;
  private stream: KvStream | null = null;
  /** id -> when it was last written (ms), in the order the jobs were created */
  private readonly index = new Map<string, number>();
  /** latest record per id, written or not yet: reads never see an older state than the service */
  private readonly cache = new Map<string, JobRecord>();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly nc: NatsConnection,
    /** the cluster's jobs bucket (ClusterNames.buckets.jobs) */
    private readonly bucket: string,
    readonly retention: JobRetention = DEFAULT_JOB_RETENTION,
    /** records read back that are not valid are skipped (and purged at open) */
    private readonly check: RecordCheck = new RecordCheck(bucket),
  ) {}

  async open(): Promise<void> {
    const kv = await createKv(this.nc, this.bucket, { history: 1, ttl: this.retention.maxAgeMs });
    const stream = await KvStream.of(this.nc, this.bucket);
    this.kv = kv;
    this.stream = stream;
    // a bucket made with another max_age (an earlier setting) takes this one
    const info = await stream.jsm.streams.info(stream.name);
    const maxAge = nanos(this.retention.maxAgeMs);
    if (info.config.max_age !== maxAge) {
      // the server refuses a duplicates window longer than max_age
      await stream.jsm.streams.update(stream.name, { ...info.config, max_age: maxAge, duplicate_window: Math.min(info.config.duplicate_window, maxAge) });
    }
    const recs: JobRecord[] = [];
    for (const key of await stream.keys()) {
      const rec = await this.read(key);
      if (rec) recs.push(rec);
      else await this.purge(key); // a delete marker an older version left, or a record that is not valid
    }
    recs.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    for (const r of recs) this.index.set(r.id, Date.parse(r.finishedAt ?? r.startedAt ?? r.createdAt));
    await Promise.all(this.evict().map((id) => this.purge(id)));
  }

  async read(id: string): Promise<JobRecord | null> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    if (!this.kv || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return null;
    const e = await this.kv.get(id);
    return (e && e.operation === 'PUT' && e.value.length && this.check.decode(id, e.value, JobRecordSchema)) || null;
  }

  /** Writes are serialised so KV never ends with an older state of a job. */
  write(rec: JobRecord): Promise<void> {
    const kv = this.kv;
    if (!kv) return Promise.reject(new Error('job store is not open'));
    const snapshot = JSON.stringify(rec);
    this.cache.set(rec.id, rec);
    this.index.set(rec.id, Date.now()); // a new id goes last; a known one keeps its place
    const evicted = this.evict(rec.id);
    const next = this.chain.then(async () => {
      // a purge that fails leaves an evicted record in KV until the bucket's max_age drops it;
      // it must not keep this record from being written
      for (const id of evicted) await this.purge(id).catch(() => undefined);
      await kv.put(rec.id, snapshot);
    });
    // the chain only orders writes: this write's caller gets its error, the next write goes on
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Every job id in KV, this replica's and the others'. */
  async keys(): Promise<string[]> {
    return this.stream ? this.stream.keys() : [];
  }

  /** Most recent first, within the retention bounds. */
  recentIds(limit: number): string[] {
    // a purge that fails leaves the record in KV until the bucket's max_age drops it
    for (const id of this.evict()) void this.purge(id).catch(() => undefined);
    return [...this.index.keys()].slice(-limit).reverse();
  }

  /** How many records the index holds (bounded by `kept`). */
  size(): number {
    return this.index.size;
  }

  /**
   * Drops from memory what is past the bounds (over `kept`, oldest first; finished and older than
   * maxAgeMs); returns the ids to purge from KV. `keep` is the record being written.
   */
  private evict(keep?: string): string[] {
    const out: string[] = [];
    const tooOld = Date.now() - this.retention.maxAgeMs;
    for (const [id, at] of this.index) {
      if (id === keep) continue;
      const rec = this.cache.get(id);
      const over = this.index.size > this.retention.kept;
      if (!over && !(at < tooOld && (!rec || isFinished(rec.state)))) break;
      this.index.delete(id);
      this.cache.delete(id);
      out.push(id);
    }
    return out;
  }

  /** Removes every message of the key: no delete marker is left. */
  private async purge(id: string): Promise<void> {
    await this.stream?.purge(id);
  }
}

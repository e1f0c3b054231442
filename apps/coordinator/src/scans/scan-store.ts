// Scan records in the cluster's scans bucket (`cmesh_scans`, `cmesh_<c>_scans`): one key per scan
// (`scan.<id>`; ids sort by time), bounded to the newest `kept`, older ones purged without a
// delete marker (as the job store does). The same bucket holds `lease`: the scan running now, so
// that no two scans run at once on any replica (a scan's pairs would share agents and measure
// each other).
import { NatsConnection } from '@nats-io/nats-core';
import { KV, KvEntry } from '@nats-io/kv';
import { createKv } from '../nats/bucket-replicas';
import { z } from 'zod';
import { ScanRecord, ScanRecordSchema } from '@cmesh/protocol';
import { KvStream } from '../state/kv-keys';
import { RecordCheck } from '../state/kv-records';

const PREFIX = 'scan.';
const LEASE = 'lease';

export interface ScanLease {
  scanId: string;
  replica: string;
  expiresAt: number;
}

const ScanLeaseSchema = z.object({ scanId: z.string(), replica: z.string(), expiresAt: z.number() });

export class ScanStore {
  private kv: KV | null = null;
  private stream: KvStream | null = null;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly nc: NatsConnection,
    readonly bucket: string,
    readonly kept: number,
    /** records read back that are not valid are skipped (a lease that is not valid counts as none) */
    private readonly check: RecordCheck = new RecordCheck(bucket),
  ) {}

  async open(): Promise<void> {
    this.kv = await createKv(this.nc, this.bucket, { history: 1 });
    this.stream = await KvStream.of(this.nc, this.bucket);
  }

  private bucketOrThrow(): KV {
    return this.kv ?? this.notOpen();
  }

  private streamOrThrow(): KvStream {
    return this.stream ?? this.notOpen();
  }

  private notOpen(): never {
    throw new Error('scan store is not open');
  }

  async read(id: string): Promise<ScanRecord | null> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return null;
    const e = await this.bucketOrThrow().get(PREFIX + id);
    if (!e || e.operation !== 'PUT' || !e.value.length) return null;
    return this.check.decode(PREFIX + id, e.value, ScanRecordSchema) ?? null;
  }

  /** Writes in order; a new scan purges the records past the newest `kept`. */
  write(rec: ScanRecord): Promise<void> {
    const kv = this.bucketOrThrow();
    const body = JSON.stringify(rec);
    const next = this.chain.then(async () => {
      await kv.put(PREFIX + rec.id, body);
      const ids = await this.ids();
      for (const old of ids.slice(0, Math.max(0, ids.length - this.kept))) await this.purge(PREFIX + old).catch(() => undefined);
    });
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Scan ids, oldest first. */
  async ids(): Promise<string[]> {
    const keys = await this.streamOrThrow().keys(`${PREFIX}>`);
    return keys
      .filter((k) => k.startsWith(PREFIX))
      .map((k) => k.slice(PREFIX.length))
      .sort();
  }

  /** The newest scans first (at most `limit`), optionally only those that finished. */
  async list(limit: number, finishedOnly = false): Promise<ScanRecord[]> {
    const out: ScanRecord[] = [];
    for (const id of (await this.ids()).reverse()) {
      if (out.length >= limit) break;
      const r = await this.read(id);
      if (r && (!finishedOnly || r.state === 'succeeded')) out.push(r);
    }
    return out;
  }

  /** Takes (or renews) the lease for `scanId`; false while another scan holds a live one. */
  async acquire(scanId: string, replica: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    const kv = this.bucketOrThrow();
    const e = await kv.get(LEASE);
    const cur = this.lease(e);
    if (cur && cur.scanId !== scanId && cur.expiresAt > now) return false;
    const lease: ScanLease = { scanId, replica, expiresAt: now + ttlMs };
    try {
      if (e) await kv.update(LEASE, JSON.stringify(lease), e.revision);
      else await kv.create(LEASE, JSON.stringify(lease));
      return true;
    } catch {
      return false; // another replica wrote it first
    }
  }

  /** The live lease, if any. */
  async holder(now = Date.now()): Promise<ScanLease | null> {
    const e = await this.bucketOrThrow().get(LEASE);
    const cur = this.lease(e);
    return cur && cur.expiresAt > now ? cur : null;
  }

  async release(scanId: string): Promise<void> {
    const kv = this.bucketOrThrow();
    const e = await kv.get(LEASE);
    const cur = this.lease(e);
    if (e && cur?.scanId === scanId) await kv.update(LEASE, JSON.stringify({ ...cur, expiresAt: 0 }), e.revision).catch(() => undefined);
  }

  private lease(e: KvEntry | null): ScanLease | null {
    return (e && e.operation === 'PUT' && e.value.length && this.check.decode(LEASE, e.value, ScanLeaseSchema)) || null;
  }

  private async purge(key: string): Promise<void> {
    await this.streamOrThrow().purge(key);
  }
}

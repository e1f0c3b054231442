// Each running job's process-group store: one KV bucket per job (the nats:// init method's
// `<job>`), created before the members open it and dropped when the job ends or nobody needs it.
// Its name carries 128 random bits made here (clusterNames().jobStorePrefix): a bucket name is
// its capability, and only the job's members are told it.
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { ClusterNames, JobRecord, isFinished } from '@cmesh/protocol';
import { randomStoreId } from '@cmesh/collectives/nats';
import { DEFAULT_STORE_LIMITS, openStoreBucket, StoreLimits } from '../stores/store-buckets';
import { STORE_LIMITS } from '../stores/stores.nats';
import { Clock } from './clock';
import { JobStore } from './job-store';
import { isStreamNotFound } from '../nats/stream-not-found';
import { JOBS_NATS, JOB_CLOCK, JOB_CLUSTER } from './tokens';

/** How often job store buckets nobody needs any more are looked for. */
export const STORE_SWEEP_MS = 60_000;
/** A job store bucket without a job record is left alone this long (its job may be starting). */
export const STORE_ORPHAN_MS = 10 * 60_000;

/** The stream of a job's store bucket, in this cluster. */
export function jobStream(names: ClusterNames, id: string, storeId: string): string {
  return `KV_${names.jobStorePrefix(id, storeId)}`;
}

/** The job id of a job store bucket's stream of this cluster, or null for any other stream (another cluster's too). */
export function jobOfStream(names: ClusterNames, stream: string): string | null {
  if (!stream.startsWith('KV_')) return null;
  const p = names.stores.parse(stream.slice(3));
  const m = p?.kind === 'jobs' ? /^(j[0-9a-z]+)-[0-9a-f]{32}$/.exec(p.id) : null;
  return m ? m[1] : null;
}

/**
 * Whether a bucket of a job not running here can go: its job finished a sweep period ago, or it
 * has had no record for STORE_ORPHAN_MS. A replica that died mid-job, or a member that recreated
 * the bucket after the job ended, leaves them behind, and each is a stream the server keeps.
 */
export function bucketUnneeded(rec: JobRecord | null, ageMs: number): boolean {
  return rec ? isFinished(rec.state) && ageMs > STORE_SWEEP_MS : ageMs > STORE_ORPHAN_MS;
}

@Injectable()
export class JobBuckets {
  private readonly log = new Logger('Jobs');
  /** job id -> its bucket, for the jobs this replica started */
  private readonly named = new Map<string, string>();

  constructor(
    @Inject(JOBS_NATS) private readonly nc: NatsConnection,
    private readonly store: JobStore,
    @Inject(JOB_CLOCK) private readonly clock: Clock,
    @Inject(JOB_CLUSTER) private readonly names: ClusterNames,
    @Optional() @Inject(STORE_LIMITS) private readonly limits: StoreLimits = DEFAULT_STORE_LIMITS,
  ) {}

  /** The job's bucket (the assignment's storePrefix): named once, with fresh random bits. */
  name(id: string): string {
    let bucket = this.named.get(id);
    if (!bucket) this.named.set(id, (bucket = this.names.jobStorePrefix(id, randomStoreId())));
    return bucket;
  }

  /**
   * Creates the job's bucket before any member opens it: members creating it at once race, and
   * a write right after another member's create can meet "no responders" (503).
   */
  async create(id: string): Promise<void> {
    try {
      await openStoreBucket(this.nc, this.names, this.name(id), this.limits);
    } catch (e) {
      this.log.warn(`job ${id}: cannot create its store bucket (${(e as Error).message}); members will ask again`);
    }
  }

  /** The job's bucket is not needed any more; never fails (a bucket left behind is swept later). */
  async drop(id: string): Promise<void> {
    const bucket = this.named.get(id);
    this.named.delete(id);
    try {
      const jsm = await jetstreamManager(this.nc);
      if (bucket) return void (await jsm.streams.delete(`KV_${bucket}`));
      // a job another replica started: its bucket is found by the job id in its name
      for await (const name of jsm.streams.names()) if (jobOfStream(this.names, name) === id) await jsm.streams.delete(name);
    } catch (e) {
      // never created (a job that failed early) or already gone: nothing to do
      if (isStreamNotFound(e)) return;
      this.log.warn(`job ${id}: cannot drop its store bucket (${(e as Error).message}); the sweep will`);
    }
  }

  /**
   * Drops the buckets nobody needs (bucketUnneeded) of jobs not running here, and this cluster's
   * other store buckets (rendezvous, nats:// init methods, service groups) that have held nothing
   * for STORE_ORPHAN_MS: every key aged out, or none was ever written. Their launchers may not
   * delete streams where logins are enforced, so they leave them behind.
   */
  async dropUnneeded(runsHere: (id: string) => boolean): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const now = this.clock.now();
    for await (const si of jsm.streams.list()) {
      const store = si.config.name.startsWith('KV_') ? this.names.stores.parse(si.config.name.slice(3)) : null;
      if (store && store.kind !== 'jobs' && si.state.messages === 0 && now - Date.parse(si.created) > STORE_ORPHAN_MS) {
        await jsm.streams.delete(si.config.name).catch(() => undefined); // gone meanwhile: nothing to do
        continue;
      }
      const id = jobOfStream(this.names, si.config.name);
      if (!id || runsHere(id)) continue;
      if (bucketUnneeded(await this.store.read(id), now - Date.parse(si.created))) {
        await jsm.streams.delete(si.config.name).catch((e: Error) => {
          if (!isStreamNotFound(e)) this.log.warn(`job ${id}: cannot drop its store bucket (${e.message})`);
        });
      }
    }
  }
}

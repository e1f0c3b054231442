// Jobs another coordinator replica left behind when it died: one running (its claims went stale
// and were taken over or swept, or its lease lapsed) must not stay "running" in KV, and one queued
// (kept in that replica's memory) would stay queued forever. Both are failed here, naming the replica.
import { Inject, Injectable, Logger } from '@nestjs/common';
import { JobRecord, isFinished } from '@cmesh/protocol';
import { Claim } from './agent-claims';
import { Clock } from './clock';
import { JobBuckets } from './job-buckets';
import { JobStore } from './job-store';
import { ReplicaLeases } from './replica-leases';
import { JOB_CLOCK } from './tokens';

@Injectable()
export class ReplicaRecovery {
  private readonly log = new Logger('Jobs');

  constructor(
    private readonly store: JobStore,
    private readonly leases: ReplicaLeases,
    private readonly buckets: JobBuckets,
    @Inject(JOB_CLOCK) private readonly clock: Clock,
  ) {}

  /** A job whose replica stopped renewing its claims (it died): its record must not stay running. */
  async closeOrphan(c: Claim, runsHere: (id: string) => boolean): Promise<void> {
    if (runsHere(c.jobId)) return;
    const rec = await this.store.read(c.jobId);
    if (!rec || isFinished(rec.state)) return;
    await this.failStored(rec, `the coordinator replica running it (${c.replica}) stopped; its agents were taken over`);
  }

  /**
   * Unfinished jobs of a replica that died: queued ones (kept in its memory) and running ones whose
   * end it never wrote (killed between freeing the agents and writing the record, whose claims then
   * never go stale). A job that names this replica yet does not run here was queued by an earlier
   * process under the same id (a container restarted in its pod keeps CMESH_REPLICA_ID), whose
   * lease this process renews: it is failed too.
   */
  async failUnfinishedOfDeadReplicas(runsHere: (id: string) => boolean): Promise<void> {
    for (const id of await this.store.keys()) {
      if (runsHere(id)) continue;
      const rec = await this.store.read(id);
      if (!rec || (rec.state !== 'queued' && rec.state !== 'running') || !rec.replica) continue;
      if (rec.replica !== this.leases.replica && (await this.leases.alive(rec.replica))) continue;
      // read again: the replica may have finished it meanwhile, just before its lease lapsed
      const now = await this.store.read(id);
      if (!now || isFinished(now.state)) continue;
      await this.failStored(
        now,
        now.state === 'queued'
          ? `the coordinator replica that queued it (${now.replica}) stopped before it could start`
          : `the coordinator replica running it (${now.replica}) stopped`,
      );
    }
  }

  /** Fails a job record another (dead) replica left unfinished in KV. */
  async failStored(rec: JobRecord, reason: string): Promise<void> {
    rec.state = 'failed';
    rec.finishedAt = new Date(this.clock.now()).toISOString();
    rec.reason = reason;
    await this.store.write(rec);
    await this.buckets.drop(rec.id);
    this.log.warn(`job ${rec.id} failed: ${reason}`);
  }
}

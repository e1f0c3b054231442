// What a replica does on its tick to share agents with the others: renews its lease and its
// running jobs' claims (five times per staleMs), frees the agents of replicas that died and fails
// their jobs (stale claims; unfinished jobs of stale leases, every staleMs), and drops job store
// buckets nobody needs (STORE_SWEEP_MS). Each is retried on its next period when it fails: only
// staleMs of failed renewals lose the lease or a claim.
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AgentClaims, Claim, claimRenewMs } from './agent-claims';
import { inBackground } from './background';
import { Cadence } from './cadence';
import { JobBuckets, STORE_SWEEP_MS } from './job-buckets';
import { ReplicaLeases } from './replica-leases';
import { ReplicaRecovery } from './replica-recovery';
import { JOB_CLAIM_STALE_MS } from './tokens';

/** What the upkeep needs of the service's jobs. */
export interface LocalJobs {
  /** this replica's running jobs and their agents */
  running(): Iterable<{ id: string; agentIds: string[] }>;
  /** whether a job is queued or running here (then it is not another replica's orphan) */
  has(id: string): boolean;
}

@Injectable()
export class ReplicaUpkeep {
  private readonly log = new Logger('Jobs');
  private readonly renewal: Cadence;
  private readonly unfinishedSweep: Cadence;
  private readonly storeSweep = new Cadence(STORE_SWEEP_MS);

  constructor(
    private readonly claims: AgentClaims,
    private readonly leases: ReplicaLeases,
    private readonly recovery: ReplicaRecovery,
    private readonly buckets: JobBuckets,
    @Inject(JOB_CLAIM_STALE_MS) staleMs: number,
  ) {
    this.renewal = new Cadence(claimRenewMs(staleMs));
    this.unfinishedSweep = new Cadence(staleMs);
  }

  /** On the service's tick: starts what is due, waits for none of it. */
  onTick(now: number, jobs: LocalJobs): void {
    const has = (id: string) => jobs.has(id);
    if (this.renewal.due(now)) this.renew(jobs);
    if (this.unfinishedSweep.due(now))
      inBackground(this.log, 'cannot fail the unfinished jobs of stopped replicas', this.recovery.failUnfinishedOfDeadReplicas(has));
    if (this.storeSweep.due(now)) inBackground(this.log, 'cannot sweep job store buckets', this.buckets.dropUnneeded(has));
  }

  /**
   * Fails the records of jobs whose claims were taken over or swept (their replica died). Not
   * retried: a record left "running" is named in the log; its agents are free all the same.
   */
  closeOrphans(stale: readonly Claim[], jobs: Pick<LocalJobs, 'has'>): void {
    for (const c of new Map(stale.map((s) => [s.jobId, s])).values()) {
      inBackground(
        this.log,
        `cannot close job ${c.jobId} of stopped replica ${c.replica}`,
        this.recovery.closeOrphan(c, (id) => jobs.has(id)),
      );
    }
  }

  private renew(jobs: LocalJobs): void {
    inBackground(this.log, "cannot renew this replica's lease", this.leases.renew());
    for (const j of jobs.running()) inBackground(this.log, `job ${j.id}: cannot renew its claims`, this.claims.renew(j.agentIds, j.id));
    inBackground(
      this.log,
      'cannot sweep stale agent claims',
      this.claims.sweepStale().then((stale) => this.closeOrphans(stale, jobs)),
    );
  }
}

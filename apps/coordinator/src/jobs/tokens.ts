// Injection tokens of the jobs module.
import type { BenchRow, JobRecord } from '@cmesh/protocol';

/** The cluster's subject and bucket names (ClusterNames) the jobs module uses. */
export const JOB_CLUSTER = Symbol('JOB_CLUSTER');

/** The NatsConnection the jobs module talks through. */
export const JOBS_NATS = Symbol('JOBS_NATS');

/** Where finished rows go besides KV (the coordinator's metrics, when present). */
export const JOB_RESULT_SINK = Symbol('JOB_RESULT_SINK');
export interface JobResultSink {
  onRow(job: JobRecord, row: BenchRow): void;
  onFinished(job: JobRecord): void;
}

/** How many finished job records are kept, and for how long (JobRetention; a default when absent). */
export const JOB_RETENTION = Symbol('JOB_RETENTION');

/** The Clock the jobs module reads time from (systemClock unless a test binds another). */
export const JOB_CLOCK = Symbol('JOB_CLOCK');

/** What one request may ask (JobLimits: largest size, queue length); DEFAULT_JOB_LIMITS when absent. */
export const JOB_LIMITS = Symbol('JOB_LIMITS');

/** This coordinator replica's id (claims, leases, job records): the coordinator's replicaId. */
export const JOB_REPLICA = Symbol('JOB_REPLICA');

/** How long an agent claim or a replica lease lasts without renewal (ms): the coordinator's claimStaleMs. */
export const JOB_CLAIM_STALE_MS = Symbol('JOB_CLAIM_STALE_MS');

// Jobs: a collective sweep run by a set of rank agents in lock-step. The coordinator accepts a
// JobRequest (REST `POST /jobs` or NATS `cmesh.jobs.submit`), assigns ranks, broadcasts a
// JobAssignment, and aggregates the agents' per-size samples into nccl-tests rows (BenchRow).
import { z } from 'zod';
import { IdempotencyKeySchema } from './idempotency';
import { BenchDtypeSchema, BenchModeSchema, BenchOpSchema, BenchRedopSchema, BenchRowSchema } from './bench';
import { DEFAULT_CLUSTER, clusterNames } from './cluster';
import type { ErrorReply } from './reply';

/** The default cluster's job subjects (another cluster's: clusterNames(cluster).jobs). */
export const JOB_SUBJECTS = clusterNames(DEFAULT_CLUSTER).jobs;

/** Agent -> coordinator liveness while a job runs; a member silent longer than the limit is lost. */
export const JOB_PING_INTERVAL_MS = 500;
export const JOB_MEMBER_SILENCE_MS = 2500;
/**
 * The silence allowed instead while NATS fails over (a server of the cluster was lost within this
 * long): the agents that were on it reconnect to another server, in about a second on a quiet
 * host and in several on a loaded one, and are heard again only then.
 */
export const JOB_NATS_FAILOVER_MS = 10_000;
/** A member that has not accepted the assignment within this time fails the job. */
export const JOB_ACCEPT_TIMEOUT_MS = 10_000;

export const JOB_BACKENDS = ['tcp', 'nccl'] as const;
export const JobBackendSchema = z.enum(JOB_BACKENDS);
export type JobBackend = z.infer<typeof JobBackendSchema>;

export const JOB_STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export const JobStateSchema = z.enum(JOB_STATES);
export type JobState = z.infer<typeof JobStateSchema>;

export function isFinished(state: JobState): boolean {
  return state === 'succeeded' || state === 'failed' || state === 'cancelled';
}

/**
 * Upper bounds on iterations. A member reports each size's samples (one time per iteration and
 * mode) in one NATS message; at 10k iterations two modes of worst-case JSON numbers stay under
 * half of nats-server's default 1 MiB max_payload, so a sweep cannot run and then be unable to
 * report. Warm-up is bounded alike so a request cannot hold its agents for hours unmeasured.
 */
export const JOB_MAX_ITERS = 10_000;
export const JOB_MAX_WARMUP = 10_000;
/**
 * The largest buffer (size) a job may ask for unless the coordinator's CMESH_JOB_MAX_BYTES says
 * otherwise; a sweep's worker holds several buffers of that size at once.
 */
export const JOB_MAX_BYTES_DEFAULT = 1 << 30;
/** No setting goes above this: the largest buffer Node allocates (buffer.constants.MAX_LENGTH, 4 GiB). */
export const JOB_MAX_BYTES_CEILING = 2 ** 32;
/**
 * The longest per-call timeout: 24 h, well inside a Node timer's range (2^31-1 ms, about 24.8 days;
 * a longer one fires at once, and healthy peers look lost).
 */
export const JOB_MAX_TIMEOUT_MS = 24 * 3600_000;
const jobBytes = z.number().int().positive().max(JOB_MAX_BYTES_CEILING, `at most ${JOB_MAX_BYTES_CEILING} bytes`);
const jobTimeout = z.number().int().positive().max(JOB_MAX_TIMEOUT_MS, `at most ${JOB_MAX_TIMEOUT_MS} ms (24 h)`);
const jobModes = z
  .array(BenchModeSchema)
  .min(1)
  .max(2)
  .refine((m) => new Set(m).size === m.length, { message: 'each mode at most once' });
const iters = z.number().int().positive().max(JOB_MAX_ITERS, `at most ${JOB_MAX_ITERS} (one size's samples must fit in one NATS message)`);
const warmup = z.number().int().min(0).max(JOB_MAX_WARMUP, `at most ${JOB_MAX_WARMUP}`);

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - only (1..64)');

/** What a client asks for. Sizes are either listed or given as nccl-tests' -b/-e/-f/-i. */
export const JobRequestSchema = z
  .object({
    op: BenchOpSchema,
    dtype: BenchDtypeSchema.default('float32'),
    redop: BenchRedopSchema.default('sum'),
    root: z.number().int().min(0).default(0),
    sizes: z.array(jobBytes).min(1).max(4096).optional(),
    minBytes: jobBytes.default(8),
    maxBytes: jobBytes.default(1 << 20),
    stepFactor: z.number().gt(1).default(2),
    stepBytes: z.number().int().nonnegative().default(0),
    iters: iters.default(20),
    warmup: warmup.default(5),
    check: z.boolean().default(true),
    modes: jobModes.default(['out-of-place', 'in-place']),
    /** force an all-reduce algorithm (CMESH_ALGO) instead of the cost model */
    algorithm: z
      .string()
      .regex(/^[a-z_-]{1,32}$/)
      .optional(),
    backend: JobBackendSchema.default('tcp'),
    /** agents by id or name, in rank order */
    agents: z.array(z.string().min(1).max(256)).min(1).max(4096).optional(),
    /** a process group allocated by the coordinator: its members in rank order */
    group: z.string().min(1).max(256).optional(),
    /** without agents or group: this many idle agents (default: every live agent) */
    nranks: z.number().int().positive().max(4096).optional(),
    /** when the agents are busy: wait for them (queued) or refuse at once */
    onBusy: z.enum(['wait', 'refuse']).default('wait'),
    /** per-call timeout of the collectives, milliseconds (at most 24 h) */
    timeoutMs: jobTimeout.default(60_000),
    /** names this submission: a retry with the same key gets the same job, never a second run (REST: the Idempotency-Key header) */
    idempotencyKey: IdempotencyKeySchema.optional(),
  })
  .refine((r) => !(r.agents && r.group), { message: 'give agents or group, not both' });
export type JobRequest = z.infer<typeof JobRequestSchema>;
export type JobRequestInput = z.input<typeof JobRequestSchema>;

/** `cmesh.jobs.get` (REST: GET /jobs/:id). */
export const JobGetSchema = z.object({ id });
export type JobGet = z.infer<typeof JobGetSchema>;

/** `cmesh.jobs.list` (REST: GET /jobs?limit=): the newest jobs first. */
export const JOB_LIST_MAX = 200;
export const JobListSchema = z.object({ limit: z.number().int().positive().max(JOB_LIST_MAX).default(20) });
export type JobList = z.infer<typeof JobListSchema>;

/** The sweep every member runs (BenchSweep's fields plus the backend and algorithm). */
export const JobSweepSchema = z.object({
  op: BenchOpSchema,
  dtype: BenchDtypeSchema,
  redop: BenchRedopSchema,
  root: z.number().int().min(0),
  sizes: z.array(jobBytes).min(1).max(4096),
  iters,
  warmup,
  check: z.boolean(),
  modes: jobModes,
  timeoutMs: jobTimeout,
  backend: JobBackendSchema,
  algorithm: z.string().optional(),
});
export type JobSweep = z.infer<typeof JobSweepSchema>;

export const JobMemberSchema = z.object({
  agentId: z.string(),
  name: z.string(),
  rank: z.number().int().min(0),
  host: z.string().optional(),
  pid: z.number().int().optional(),
  device: z.string().optional(),
  /** the node its agent runs on, as the agent registered it (absent: a node of its own) */
  node: z.string().optional(),
  /** torchrun's LOCAL_RANK: its position among the job's members on its node */
  localRank: z.number().int().min(0).optional(),
  /** torchrun's LOCAL_WORLD_SIZE: the job's members on its node */
  localWorldSize: z.number().int().positive().optional(),
  /** torchrun's GROUP_RANK: its node's position among the job's nodes (in rank order) */
  groupRank: z.number().int().min(0).optional(),
  /** torchrun's GROUP_WORLD_SIZE: the job's nodes */
  groupWorldSize: z.number().int().positive().optional(),
});
export type JobMember = z.infer<typeof JobMemberSchema>;

/** coordinator -> agents: run this sweep as these ranks, bootstrapping through the store at `storePrefix`. */
export const JobAssignmentSchema = z.object({
  jobId: id,
  sweep: JobSweepSchema,
  members: z.array(JobMemberSchema).min(1),
  /** the `<job>` of the nats:// init method: the coordinator's store for this job's process group */
  storePrefix: z.string(),
  /**
   * the job's data-plane secret, made by the coordinator: sent only on each member agent's own
   * `jobs.start.<agent>` subject, never written to a bucket
   */
  secret: z.string().min(16).max(256),
  /**
   * a copy asking a member that ran the job for its samples and end again (core NATS lost them):
   * an agent without them ignores it, and never starts the job from it
   */
  again: z.literal(true).optional(),
});
export type JobAssignment = z.infer<typeof JobAssignmentSchema>;

export const JobCancelSchema = z.object({ jobId: id, reason: z.string() });
export type JobCancel = z.infer<typeof JobCancelSchema>;

/** One rank's raw samples of one size (@cmesh/bench's SizeSamples). */
export const SizeSamplesSchema = z.object({
  requestedBytes: z.number().int().positive(),
  bytes: z.number().int().nonnegative(),
  count: z.number().int().nonnegative(),
  variants: z.array(
    z.object({
      mode: BenchModeSchema,
      times: z.array(z.number().nonnegative()).min(1).max(JOB_MAX_ITERS),
      wrong: z.number().int().nonnegative().nullable(),
    }),
  ),
  /** Data-plane bytes this rank sent and received for this size (warm-up and checks included). */
  wire: z.object({ sent: z.number().nonnegative(), received: z.number().nonnegative() }).optional(),
});
export type SizeSamplesMsg = z.infer<typeof SizeSamplesSchema>;

export const JobErrorSchema = z.object({
  name: z.string(),
  message: z.string(),
  code: z.string().optional(),
  /** ranks the data plane named as failed (PeerFailureError context.peers) */
  peers: z.array(z.number().int()).optional(),
});
export type JobError = z.infer<typeof JobErrorSchema>;

const eventBase = { jobId: id, agentId: z.string(), rank: z.number().int().min(0) };
export const JobEventSchema = z.discriminatedUnion('type', [
  z.object({ ...eventBase, type: z.literal('accepted'), pid: z.number().int(), host: z.string(), device: z.string() }),
  /** `reconnects`: how often the agent's NATS connection came back (a rise: it was in a failover) */
  z.object({ ...eventBase, type: z.literal('ping'), reconnects: z.number().int().min(0).optional() }),
  z.object({ ...eventBase, type: z.literal('size'), samples: SizeSamplesSchema }),
  z.object({ ...eventBase, type: z.literal('done') }),
  z.object({ ...eventBase, type: z.literal('failed'), error: JobErrorSchema }),
]);
export type JobEvent = z.infer<typeof JobEventSchema>;

export const JobRecordSchema = z.object({
  id,
  state: JobStateSchema,
  request: z.record(z.string(), z.unknown()),
  sweep: JobSweepSchema,
  members: z.array(JobMemberSchema),
  rows: z.array(BenchRowSchema),
  /** sizes with a row so far / sizes requested */
  progress: z.object({ done: z.number().int(), total: z.number().int() }),
  /** why it failed, was refused or cancelled; names the agent where one is to blame */
  reason: z.string().optional(),
  failedAgent: z.string().optional(),
  /** the coordinator replica that queued and runs it */
  replica: z.string().optional(),
  createdAt: z.string(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
});
export type JobRecord = z.infer<typeof JobRecordSchema>;

/** Replies over NATS: the record(s), or the protocol's error reply (like every coordinator endpoint). */
export type JobReply = { ok: true; job: JobRecord } | ErrorReply;
export type JobListReply = { ok: true; jobs: JobRecord[] } | ErrorReply;

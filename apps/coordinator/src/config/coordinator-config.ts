// Coordinator configuration: ONE schema (CoordinatorSettings) holds every setting's variable,
// flag, default and help; the environment is read first and flags override it
// (`--nats URL --port N`), and `--help` prints the same table.
import { readFileSync } from 'fs';
import { hostname } from 'os';
import { z } from 'zod';
import {
  DEFAULT_CLUSTER,
  DEFAULT_SCANS_KEPT,
  JOB_MAX_BYTES_CEILING,
  JobBackendSchema,
  JOB_MAX_BYTES_DEFAULT,
  DEFAULT_STORE_MAX_AGE_S,
  DEFAULT_STORE_MAX_BYTES,
  checkClusterName,
} from '@cmesh/protocol';
import { intSetting, loadSettings, readSecretSetting, setting, settingsHelp } from '@cmesh/protocol/kit';
import type { ApiTokens } from '../http/api-auth.guard';
import { DEFAULT_JOB_QUEUE_MAX } from '../jobs/job-limits';
import { CLAIM_STALE_MS } from '../jobs/agent-claims';

export const CoordinatorSettings = z.object({
  natsUrl: setting(z.string().min(1).default('nats://127.0.0.1:4222'), {
    env: 'NATS_URL',
    flag: '--nats',
    help: 'NATS server (JetStream on); several of a cluster comma-separated',
  }),
  /** replicas of every JetStream bucket the mesh makes; unset: min(3, the cluster's JetStream servers) */
  natsReplicas: setting(intSetting(1, 5).optional(), {
    env: 'CMESH_NATS_REPLICAS',
    flag: '--nats-replicas',
    help: 'replicas of every JetStream bucket the mesh makes; existing ones below it are raised at start',
    defaultText: 'min(3, JetStream servers in the cluster)',
  }),
  httpPort: setting(intSetting(0, 65535).default(7700), { env: 'HTTP_PORT', flag: '--port', help: 'REST API, /health, /metrics, OpenAPI at /docs' }),
  httpHost: setting(z.string().min(1).default('127.0.0.1'), {
    env: 'HTTP_HOST',
    flag: '--host',
    help: 'address the HTTP server listens on (0.0.0.0 in containers)',
  }),
  cluster: setting(
    // a bad name throws checkClusterName's typed InvalidClusterNameError
    z
      .string()
      .default(DEFAULT_CLUSTER)
      .transform((c) => checkClusterName(c)),
    { env: 'CMESH_CLUSTER', flag: '--cluster', help: 'cluster name: every subject and bucket carries it' },
  ),
  /** how often agents are asked to heartbeat */
  heartbeatMs: setting(intSetting(50, 600_000).default(1000), {
    env: 'CMESH_HEARTBEAT_MS',
    flag: '--heartbeat-ms',
    help: 'heartbeat interval the agents are told to use, ms',
  }),
  /** an agent silent for this many heartbeats is lost */
  missedHeartbeats: setting(intSetting(1, 1000).default(3), {
    env: 'CMESH_MISSED_HEARTBEATS',
    flag: '--missed-heartbeats',
    help: 'an agent silent for this many intervals is lost',
  }),
  /** the leader lease lasts this long unless renewed */
  leaseMs: setting(intSetting(200, 600_000).default(3000), { env: 'CMESH_LEASE_MS', flag: '--lease-ms', help: 'leader lease, ms (renewed every lease/3)' }),
  /** this replica's one identity: leader lease, job claims, replica lease, job records, logs */
  replicaId: setting(
    z
      .string()
      // a KV key (replica leases) and a NATS connection name
      .regex(/^[A-Za-z0-9_.-]{1,128}$/, 'letters, digits, _ . and - only (1..128)')
      .default(() => `${hostname()}-${process.pid}`),
    {
      env: 'CMESH_REPLICA_ID',
      flag: '--replica-id',
      help: "this replica's identity: leader lease, job claims, replica lease, job records",
      defaultText: '<hostname>-<pid>',
    },
  ),
  /** finished job records kept (GET /jobs, KV), newest first */
  jobsKept: setting(intSetting(1, 100_000).default(200), { env: 'CMESH_JOBS_KEPT', flag: '--jobs-kept', help: 'finished job records kept, newest first' }),
  /** a job record not written for this long is dropped, in memory and in KV */
  jobsMaxAgeS: setting(intSetting(60, 365 * 24 * 3600).default(7 * 24 * 3600), {
    env: 'CMESH_JOBS_MAX_AGE_S',
    flag: '--jobs-max-age-s',
    help: 'a job record not written for this long is dropped, s',
  }),
  /** the largest size a job may ask for (its largest buffer; a worker holds several) */
  jobMaxBytes: setting(intSetting(1 << 20, JOB_MAX_BYTES_CEILING).default(JOB_MAX_BYTES_DEFAULT), {
    env: 'CMESH_JOB_MAX_BYTES',
    flag: '--job-max-bytes',
    help: 'largest size (bytes) a job may ask for; larger ones are refused (400)',
  }),
  /** jobs waiting for their agents at most; one more is refused */
  jobQueueMax: setting(intSetting(0, 100_000).default(DEFAULT_JOB_QUEUE_MAX), {
    env: 'CMESH_JOB_QUEUE_MAX',
    flag: '--job-queue-max',
    help: 'jobs that may wait for busy agents; one more is refused (429)',
  }),
  /** an agent's claim or a replica's lease not renewed for this long: its replica stopped (renewed five times within it) */
  claimStaleMs: setting(intSetting(1000, 600_000).default(CLAIM_STALE_MS), {
    env: 'CMESH_CLAIM_STALE_MS',
    flag: '--claim-stale-ms',
    help: "a replica's agent claims and lease not renewed for this long (ms) are stale: others free its agents and fail its jobs",
  }),
  /** the leader scans idle agents this often (0: never) */
  scanEveryMs: setting(durationSetting().default(0), {
    env: 'CMESH_SCAN_EVERY',
    flag: '--scan-every',
    help: 'the leader replica scans the idle agents this often (30m, 1h, 90s; 0 or off: never)',
    defaultText: 'off',
  }),
  /** what the scheduled scans measure: a GPU cluster watches NCCL itself, not only the CPU data plane */
  scanBackend: setting(JobBackendSchema.default('tcp'), {
    env: 'CMESH_SCAN_BACKEND',
    flag: '--scan-backend',
    help: "backend of the scheduled scans: tcp (the CPU data plane) or nccl (NCCL between the agents' GPUs)",
  }),
  /** one store bucket (a job's, a service group's, a nats:// or `cmesh run` rendezvous) may hold this many bytes */
  storeMaxBytes: setting(intSetting(1024, 2 ** 40).default(DEFAULT_STORE_MAX_BYTES), {
    env: 'CMESH_STORE_MAX_BYTES',
    flag: '--store-max-bytes',
    help: 'bytes one store bucket may hold; writes past it are refused',
  }),
  /** a store bucket's key older than this is dropped */
  storeMaxAgeS: setting(intSetting(60, 365 * 24 * 3600).default(DEFAULT_STORE_MAX_AGE_S), {
    env: 'CMESH_STORE_MAX_AGE_S',
    flag: '--store-max-age-s',
    help: "a store bucket's key older than this is dropped, s",
  }),
  /** scan records kept in the scans bucket, newest first */
  scansKept: setting(intSetting(1, 10_000).default(DEFAULT_SCANS_KEPT), {
    env: 'CMESH_SCANS_KEPT',
    flag: '--scans-kept',
    help: 'scan records kept (GET /scans, KV), newest first',
  }),
  /** per-link scan metrics for every link only up to this many agents (flagged links always) */
  scanLinkMetricsMaxAgents: setting(intSetting(0, 1024).default(8), {
    env: 'CMESH_SCAN_LINK_METRICS_MAX_AGENTS',
    flag: '--scan-link-metrics-max-agents',
    help: 'export every link of the last scan up to this many agents; above it only flagged links',
  }),
});

/** A duration: `0`/`off`, or a number with ms, s, m or h (`30m`), in milliseconds. */
export function durationSetting() {
  const msg = 'a duration like 30m, 1h, 90s, 500ms, or 0/off';
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return z
    .string()
    .trim()
    .regex(/^(0|off|\d+(\.\d+)?(ms|s|m|h))$/, msg)
    .transform((v) => {
      const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(v);
      return m ? Math.round(Number(m[1]) * unit[m[2]]) : 0;
    })
    .pipe(
      z
        .number()
        .int()
        .min(0)
        .max(30 * 24 * 3_600_000, 'at most 30 days'),
    );
}

export type CoordinatorConfig = z.output<typeof CoordinatorSettings>;

export const COORDINATOR_CONFIG = Symbol('COORDINATOR_CONFIG');
/** The cluster's subject and bucket names (ClusterNames of @cmesh/protocol). */
export const CLUSTER_NAMES = Symbol('CLUSTER_NAMES');

export function loadCoordinatorConfig(argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): CoordinatorConfig {
  return loadSettings(CoordinatorSettings, argv, env);
}

export function coordinatorHelp(): string {
  return settingsHelp(CoordinatorSettings, 'cmesh-coordinator [flags]  (node apps/coordinator/dist/main.js)');
}

/**
 * The REST API's bearer tokens, from variables only (never flags: they would show in `ps`):
 * CMESH_API_TOKEN may call every route, CMESH_API_READ_TOKEN only GET routes; each also as a file
 * named by CMESH_API_TOKEN_FILE / CMESH_API_READ_TOKEN_FILE. Neither set: the API is open.
 */
export function loadApiTokens(env: NodeJS.ProcessEnv = process.env): ApiTokens {
  const read = (path: string) => readFileSync(path, 'utf8');
  // the names as the configuration page lists them; readSecretSetting also reads <NAME>_FILE
  const admin = readSecretSetting('CMESH_API_TOKEN', { CMESH_API_TOKEN: env.CMESH_API_TOKEN, CMESH_API_TOKEN_FILE: env.CMESH_API_TOKEN_FILE }, read);
  const readOnly = readSecretSetting(
    'CMESH_API_READ_TOKEN',
    { CMESH_API_READ_TOKEN: env.CMESH_API_READ_TOKEN, CMESH_API_READ_TOKEN_FILE: env.CMESH_API_READ_TOKEN_FILE },
    read,
  );
  return { admin, read: readOnly };
}

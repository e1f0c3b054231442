// Coordinator configuration: environment first, flags override (`--nats URL --port N`).
import { hostname } from 'os';
import { DEFAULT_CLUSTER, checkClusterName } from '@cmesh/protocol';
export interface CoordinatorConfig {
  natsUrl: string;
  httpPort: number;
  httpHost: string;
  cluster: string;
  /** how often agents are asked to heartbeat */
  heartbeatMs: number;
  /** an agent silent for this many heartbeats is lost */
  missedHeartbeats: number;
  /** the leader lease lasts this long unless renewed */
  leaseMs: number;
  /** this replica's one identity: leader lease, job claims, replica lease, job records, logs */
  replicaId: string;
  /** finished job records kept (GET /jobs, KV), newest first */
  jobsKept: number;
  /** a job record not written for this long is dropped, in memory and in KV */
  jobsMaxAgeMs: number;
}

export const COORDINATOR_CONFIG = Symbol('COORDINATOR_CONFIG');
/** The cluster's subject and bucket names (ClusterNames of @cmesh/protocol). */
export const CLUSTER_NAMES = Symbol('CLUSTER_NAMES');

const FLAGS: Record<string, string> = {
  '--nats': 'NATS_URL',
  '--port': 'HTTP_PORT',
  '--host': 'HTTP_HOST',
  '--cluster': 'CMESH_CLUSTER',
  '--heartbeat-ms': 'CMESH_HEARTBEAT_MS',
  '--missed-heartbeats': 'CMESH_MISSED_HEARTBEATS',
  '--lease-ms': 'CMESH_LEASE_MS',
  '--replica-id': 'CMESH_REPLICA_ID',
  '--jobs-kept': 'CMESH_JOBS_KEPT',
  '--jobs-max-age-s': 'CMESH_JOBS_MAX_AGE_S',
};

function int(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return n;
}

export function loadCoordinatorConfig(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): CoordinatorConfig {
  const e: Record<string, string | undefined> = { ...env };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const key = FLAGS[flag];
    if (!key) throw new RangeError(`unknown flag ${flag}; known: ${Object.keys(FLAGS).join(' ')}`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new RangeError(`${flag} needs a value`);
    e[key] = value;
  }
  const cluster = checkClusterName(e.CMESH_CLUSTER ?? DEFAULT_CLUSTER);
  const replicaId = e.CMESH_REPLICA_ID ?? `${hostname()}-${process.pid}`;
  // a KV key (replica leases) and a NATS connection name
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(replicaId)) throw new RangeError(`CMESH_REPLICA_ID ${JSON.stringify(replicaId)}: letters, digits, _ . and - only (1..128)`);
  return {
    natsUrl: e.NATS_URL ?? 'nats://127.0.0.1:4222',
    httpPort: int('HTTP_PORT', e.HTTP_PORT ?? '7700', 0, 65535),
    httpHost: e.HTTP_HOST ?? '127.0.0.1',
    cluster,
    heartbeatMs: int('CMESH_HEARTBEAT_MS', e.CMESH_HEARTBEAT_MS ?? '1000', 50, 600_000),
    missedHeartbeats: int('CMESH_MISSED_HEARTBEATS', e.CMESH_MISSED_HEARTBEATS ?? '3', 1, 1000),
    leaseMs: int('CMESH_LEASE_MS', e.CMESH_LEASE_MS ?? '3000', 200, 600_000),
    replicaId,
    jobsKept: int('CMESH_JOBS_KEPT', e.CMESH_JOBS_KEPT ?? '200', 1, 100_000),
    jobsMaxAgeMs: 1000 * int('CMESH_JOBS_MAX_AGE_S', e.CMESH_JOBS_MAX_AGE_S ?? String(7 * 24 * 3600), 60, 365 * 24 * 3600),
  };
}

// A cluster's names on a NATS server: every subject and every JetStream bucket of the mesh carries
// the cluster, so several clusters share one server without seeing each other's agents, groups,
// rendezvous rounds, jobs or claims. clusterNames() is the only place these names are built.
//
// The default cluster keeps the names cmesh has always used (`cmesh.agents.register`,
// `cmesh_jobs`, …), so an existing installation keeps its job records and mixed versions still talk
// during an upgrade. Another cluster `<c>` puts its name after `cmesh.` (`cmesh.<c>.agents.register`)
// and into each bucket (`cmesh_<c>_jobs`). Cluster names are letters, digits and `-`: with no `_`
// (the separator in bucket names) and none of the default cluster's name segments (RESERVED), no
// two clusters' names can meet.

import { StoreKind, parseStoreBucket, storeBucket, storesOpenSubject } from '@cmesh/collectives/store-names';

export const DEFAULT_CLUSTER = 'default';

/** Names a cluster may not take: they are name segments of the default cluster's subjects and buckets. */
export const RESERVED_CLUSTER_NAMES = ['agents', 'groups', 'rdzv', 'jobs', 'store', 'stores', 'trace', 'scans', 'svc'] as const;

const CLUSTER_NAME = /^[A-Za-z0-9-]{1,64}$/;

/** A cluster name that cannot be a NATS subject token and bucket name segment of its own. */
export class InvalidClusterNameError extends Error {
  readonly code = 'INVALID_CLUSTER_NAME';
  constructor(
    readonly cluster: string,
    why: string,
  ) {
    super(`cluster name ${JSON.stringify(cluster)}: ${why}`);
    this.name = 'InvalidClusterNameError';
  }
}

/** The name itself when it is valid; InvalidClusterNameError naming what is wrong otherwise. */
export function checkClusterName(cluster: string): string {
  if (!CLUSTER_NAME.test(cluster)) throw new InvalidClusterNameError(cluster, 'letters, digits and - only (1..64)');
  if ((RESERVED_CLUSTER_NAMES as readonly string[]).includes(cluster))
    throw new InvalidClusterNameError(cluster, `reserved (${RESERVED_CLUSTER_NAMES.join(', ')} are name segments of the default cluster)`);
  return cluster;
}

export interface ClusterNames {
  cluster: string;
  /**
   * An agent's requests carry its id as the subject's last token, the one its NATS login may
   * publish on (nats-permissions.ts): the coordinator takes the agent's identity from the subject,
   * never from the body alone. `*Wildcard`: what the coordinator subscribes.
   */
  agents: {
    register: (agentId: string) => string;
    registerWildcard: string;
    heartbeat: (agentId: string) => string;
    heartbeatWildcard: string;
    deregister: (agentId: string) => string;
    deregisterWildcard: string;
    list: string;
    /** coordinator -> one agent: notifications (group membership) */
    events: (agentId: string) => string;
  };
  groups: { create: string; get: string; list: string };
  rdzv: {
    join: string;
    get: string;
    /** a member reports another one lost (or leaves): the round is reopened */
    leave: string;
  };
  jobs: {
    /** request/reply to the coordinator: JobRequest -> JobReply */
    submit: string;
    /** request/reply: JobGet -> JobReply */
    get: string;
    /** request/reply: JobList -> JobListReply */
    list: string;
    /** coordinator -> one member agent (event): JobAssignment with the job's secret; only that agent's login reads it */
    start: (agentId: string) => string;
    /** coordinator -> agents (broadcast event): JobCancel; members stop the job's sweep */
    cancel: string;
    /** agent -> coordinator: JobEvent of one job, on the sending agent's own subject */
    events: (jobId: string, agentId: string) => string;
    eventsWildcard: string;
    /** coordinator -> watchers: the JobRecord after every change */
    updates: (jobId: string) => string;
  };
  trace: {
    /**
     * coordinator -> every rank (request, many replies): TraceCollect -> the rank's flight recorder
     * summary (TraceDump). Ranks of `cmesh run --rdzv-backend nats` and the agents' job workers answer.
     */
    collect: string;
  };
  scans: {
    /** request/reply to the coordinator: ScanRequest -> ScanReply (the scan runs in the background) */
    run: string;
    /** request/reply: ScanGet -> ScanReply */
    get: string;
    /** request/reply: ScanList -> ScanListReply */
    list: string;
  };
  /**
   * Service groups, collectives as a service (service-groups.ts): members join named groups;
   * agents run their ops. On the wire their token is `svc`, as clients in other languages know it.
   */
  serviceGroups: {
    /** request/reply, member -> coordinator: ServiceGroupJoin -> ServiceGroupJoinReply */
    join: string;
    /** request/reply, member -> coordinator: ServiceGroupLeave (a member giving up before its round is placed) */
    leave: string;
    /** coordinator -> members (event): ServiceGroupPlaced, the round's ranks and agents, or why it could not be placed */
    placed: (name: string) => string;
    placedWildcard: string;
    /** member -> its agent: ServiceGroupOp (JSON) and the op's data chunks (headers Cmesh-Seq, Cmesh-Offset) */
    op: (groupId: string, rank: number) => string;
    /** agent -> its member: ServiceGroupResult (JSON) and the result's data chunks */
    result: (groupId: string, rank: number) => string;
    /** members and agents of a group (event): ServiceGroupHeartbeat every 500 ms */
    heartbeat: (groupId: string) => string;
    /** anyone -> the group (event): ServiceGroupEnd, the group is over (left, lost, failed) */
    end: (groupId: string) => string;
    endWildcard: string;
    /** coordinator -> the group's member workers (request, one reply per rank): ServiceGroupRankStatus, the op each runs now */
    status: (groupId: string) => string;
    /** what the agents' permissions need: every group's op, result, heartbeat and end subjects */
    groupWildcard: string;
  };
  buckets: {
    /** agents, groups, rendezvous rounds, the leader lease (KV_KEYS) */
    state: string;
    /** one record per job */
    jobs: string;
    /** one key per agent: the job holding it */
    claims: string;
    /** one lease per live coordinator replica */
    replicas: string;
    /** the last scans' records (ScanRecord), and the lease of the scan running now */
    scans: string;
    /** idempotency keys of job submissions and service joins: key -> first outcome (idempotency.ts) */
    idempotency: string;
  };
  /**
   * Store buckets (the KV buckets process groups rendezvous through; @cmesh/collectives'
   * store-names.ts): every one's name carries an unguessable id, since the name is its capability.
   */
  stores: {
    /** request/reply, anyone -> coordinator: StoreOpen -> StoreOpenReply (only the coordinator creates streams) */
    open: string;
    /** the store bucket of a kind for an id (128 random bits, or an HMAC of a secret its users hold) */
    bucket: (kind: StoreKind, id: string) => string;
    /** the kind and id of one of this cluster's store buckets; null for any other name (another cluster's too) */
    parse: (bucket: string) => { kind: StoreKind; id: string } | null;
  };
  /** a job's store bucket (the `<job>` of its nats:// init method): its id and 128 random bits the coordinator made */
  jobStorePrefix: (jobId: string, storeId: string) => string;
}

/** Every subject and bucket name of a cluster (DEFAULT_CLUSTER: the unscoped names). */
export function clusterNames(cluster: string = DEFAULT_CLUSTER): ClusterNames {
  const isDefault = cluster === DEFAULT_CLUSTER;
  if (!isDefault) checkClusterName(cluster);
  const s = isDefault ? 'cmesh' : `cmesh.${cluster}`;
  const b = (kind: string) => (isDefault ? `cmesh_${kind}` : `cmesh_${cluster}_${kind}`);
  return {
    cluster,
    agents: {
      register: (agentId) => `${s}.agents.register.${agentId}`,
      registerWildcard: `${s}.agents.register.*`,
      heartbeat: (agentId) => `${s}.agents.heartbeat.${agentId}`,
      heartbeatWildcard: `${s}.agents.heartbeat.*`,
      deregister: (agentId) => `${s}.agents.deregister.${agentId}`,
      deregisterWildcard: `${s}.agents.deregister.*`,
      list: `${s}.agents.list`,
      events: (agentId) => `${s}.agents.events.${agentId}`,
    },
    groups: { create: `${s}.groups.create`, get: `${s}.groups.get`, list: `${s}.groups.list` },
    rdzv: { join: `${s}.rdzv.join`, get: `${s}.rdzv.get`, leave: `${s}.rdzv.leave` },
    jobs: {
      submit: `${s}.jobs.submit`,
      get: `${s}.jobs.get`,
      list: `${s}.jobs.list`,
      start: (agentId) => `${s}.jobs.start.${agentId}`,
      cancel: `${s}.jobs.cancel`,
      events: (jobId, agentId) => `${s}.jobs.events.${jobId}.${agentId}`,
      eventsWildcard: `${s}.jobs.events.*.*`,
      updates: (jobId) => `${s}.jobs.updates.${jobId}`,
    },
    trace: { collect: `${s}.trace.collect` },
    scans: { run: `${s}.scans.run`, get: `${s}.scans.get`, list: `${s}.scans.list` },
    serviceGroups: {
      join: `${s}.svc.join`,
      leave: `${s}.svc.leave`,
      placed: (name) => `${s}.svc.placed.${name}`,
      placedWildcard: `${s}.svc.placed.*`,
      op: (groupId, rank) => `${s}.svc.g.${groupId}.op.${rank}`,
      result: (groupId, rank) => `${s}.svc.g.${groupId}.res.${rank}`,
      heartbeat: (groupId) => `${s}.svc.g.${groupId}.hb`,
      end: (groupId) => `${s}.svc.g.${groupId}.end`,
      endWildcard: `${s}.svc.g.*.end`,
      status: (groupId) => `${s}.svc.g.${groupId}.status`,
      groupWildcard: `${s}.svc.g.>`,
    },
    buckets: {
      // the state bucket was cluster-scoped from the start: `cmesh_default` for the default cluster
      state: `cmesh_${cluster}`,
      jobs: b('jobs'),
      claims: b('job_claims'),
      replicas: b('coordinator_replicas'),
      scans: b('scans'),
      idempotency: b('idempotency'),
    },
    stores: {
      open: storesOpenSubject(cluster),
      bucket: (kind, id) => storeBucket(cluster, kind, id),
      parse: (bucket) => {
        const p = parseStoreBucket(bucket);
        return p && p.cluster === cluster ? { kind: p.kind, id: p.id } : null;
      },
    },
    jobStorePrefix: (jobId, storeId) => storeBucket(cluster, 'jobs', `${jobId}-${storeId}`),
  };
}

/**
 * The subject a NATS handler's pattern names in this cluster: `<area>.<name>` of ClusterNames
 * (`agents.registerWildcard`, `jobs.eventsWildcard`); a subject made for one id (`agents.events`) takes it
 * as `id`. Controllers name subjects this way because the cluster is known only at start-up.
 */
export function clusterSubject(names: ClusterNames, pattern: string, id?: string): string {
  const [area, name, ...rest] = pattern.split('.');
  const group = (['agents', 'groups', 'rdzv', 'jobs', 'trace', 'scans', 'serviceGroups', 'stores'] as const).find((a) => a === area);
  const v = group && !rest.length ? (names[group] as Record<string, string | ((id: string) => string)>)[name] : undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'function' && id !== undefined) return (v as (id: string) => string)(id);
  throw new Error(`no subject for NATS pattern ${JSON.stringify(pattern)}${typeof v === 'function' ? ' without an id' : ''}`);
}

/** The last token of a subject: the agent id of an agent's own subject (agents.register.<id>, jobs.events.<job>.<id>). */
export function subjectAgent(subject: string): string {
  return subject.slice(subject.lastIndexOf('.') + 1);
}

// Rank agents: registration, heartbeats and states. Agents talk to the coordinator by NATS
// request/reply on these subjects (scoped by cluster, see cluster.ts); the coordinator keeps every record in JetStream KV.
import { z } from 'zod';
import { DEFAULT_CLUSTER, clusterNames } from './cluster';

/** The default cluster's agent subjects (another cluster's: clusterNames(cluster).agents). */
export const AGENT_SUBJECTS = clusterNames(DEFAULT_CLUSTER).agents;

export const AGENT_STATES = ['ready', 'busy', 'lost'] as const;
export const AgentStateSchema = z.enum(AGENT_STATES);
export type AgentState = z.infer<typeof AgentStateSchema>;

/**
 * An id that becomes a KV key segment (agents, groups, runs): checked before any KV access, since a
 * key with other characters is refused by the server (a 500 instead of a 400). The message names it.
 */
export const KvIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: (iss) => `${JSON.stringify(iss.input)}: letters, digits, _ and - only (1..64)` });

/** @alias an agent id is a KV id */
export const AgentIdSchema = KvIdSchema;

/**
 * The node (machine) an agent runs on (CMESH_NODE_NAME: the host name by default, Kubernetes'
 * spec.nodeName in a pod): agents on one node share its NVLink/PCIe and shared memory, so
 * placement packs a job's ranks node by node and scans tell intra-node links from inter-node ones.
 * A host name or a Kubernetes node name (a DNS subdomain) fits.
 */
export const NodeNameSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/, {
  error: (iss) => `node name ${JSON.stringify(iss.input)}: letters, digits, '.', '_' and '-' only, starting with a letter or digit (1..253)`,
});

export const BackendInfoSchema = z.object({
  name: z.enum(['tcp', 'nccl']),
  available: z.boolean(),
  /** why it is unavailable (no GPU, no NCCL…) */
  reason: z.string().optional(),
});

export const AgentRegisterSchema = z.object({
  /** checked by the coordinator, which answers UNSUPPORTED_VERSION to another version */
  protocolVersion: z.number().int().positive(),
  agentId: AgentIdSchema,
  name: z.string().min(1).max(128),
  host: z.string().min(1),
  /** which processes share its machine (the library's hostIdentity()): service members on it are placed on it */
  hostId: z.string().max(256).optional(),
  /**
   * the node it runs on (NodeNameSchema). Unlike hostId (one kernel, PID and network namespace),
   * pods of one Kubernetes node share it. An agent that does not say is a node of its own.
   */
  node: NodeNameSchema.optional(),
  pid: z.number().int().positive().optional(),
  device: z.object({ kind: z.enum(['cpu', 'gpu']), index: z.number().int().min(0), name: z.string().optional() }),
  backends: z.array(BackendInfoSchema).min(1),
  /** where peers reach the agent's CPU data plane */
  dataPlane: z.object({ host: z.string().min(1), portRange: z.tuple([z.number().int(), z.number().int()]).optional() }),
  /** the agent's /metrics and /health */
  httpUrl: z.string().url().optional(),
});
export type AgentRegister = z.infer<typeof AgentRegisterSchema>;

export const AgentHeartbeatSchema = z.object({
  agentId: AgentIdSchema,
  /** the agent's own view: running a job or not */
  busy: z.boolean().default(false),
  /** the service groups it runs a member of now (group ids): a placed group no agent serves any more has ended */
  serving: z.array(z.string().max(128)).max(1024).optional(),
  /** its backends, when they changed since it registered or last said (an NCCL sidecar lost or back) */
  backends: z.array(BackendInfoSchema).min(1).optional(),
});
export type AgentHeartbeat = z.infer<typeof AgentHeartbeatSchema>;

export const AgentDeregisterSchema = z.object({ agentId: AgentIdSchema });

export const AgentRecordSchema = AgentRegisterSchema.extend({
  state: AgentStateSchema,
  registeredAt: z.string(),
  lastHeartbeat: z.string(),
  /** largest gap between two heartbeats seen, seconds */
  maxHeartbeatGapSeconds: z.number().nonnegative(),
});
export type AgentRecord = z.infer<typeof AgentRecordSchema>;

/** The answer to a heartbeat on NATS: a few bytes (the state and the interval), not the whole record. */
export const AgentHeartbeatReplySchema = z.object({ ok: z.literal(true), state: AgentStateSchema, heartbeatMs: z.number().int().positive().max(600_000) });
export type AgentHeartbeatReply = z.infer<typeof AgentHeartbeatReplySchema>;

/** coordinator -> agent event */
export const AgentEventSchema = z.object({
  type: z.literal('group-joined'),
  groupId: z.string(),
  rank: z.number().int().min(0),
  size: z.number().int().positive(),
  storePrefix: z.string(),
});
export type AgentEvent = z.infer<typeof AgentEventSchema>;

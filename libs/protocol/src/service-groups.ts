// Service groups, collectives as a service: any process with a NATS client joins a named group,
// is placed on a rank agent (one member per agent), and runs collectives on its own data; the
// agents run them among themselves with the library. The subjects are
// clusterNames(cluster).serviceGroups (`<prefix>.svc.*` on the wire); docs/api.md ("Collectives as
// a service") is the written protocol for clients in other languages.
//
// Data travels as raw little-endian elements in NATS messages no larger than the server's
// max_payload: a JSON header message (ServiceGroupOp / ServiceGroupResult), then the bytes in
// chunks, each with the headers Cmesh-Seq (the op's number) and Cmesh-Offset (the chunk's first byte).
import { z } from 'zod';
import { DTYPES, REDUCE_OPS } from '@cmesh/collectives/names';
import { AgentEventSchema, KvIdSchema } from './agents';
import { IdempotencyKeySchema } from './idempotency';

/** Chunk headers of the op's and the result's data messages. */
export const SERVICE_GROUP_HEADERS = { seq: 'Cmesh-Seq', offset: 'Cmesh-Offset' } as const;
/** How often members and agents publish ServiceGroupHeartbeat on the group's heartbeat subject. */
export const SERVICE_GROUP_HEARTBEAT_MS = 500;
/** A participant not heard for this long is lost: the group ends naming it. */
export const SERVICE_GROUP_LOST_MS = 3000;
/** The collectives a service group runs. */
export const SERVICE_GROUP_OPS = ['allReduce', 'broadcast', 'reduce', 'allGather', 'gather', 'scatter', 'reduceScatter', 'allToAll', 'barrier'] as const;
export type ServiceGroupOpName = (typeof SERVICE_GROUP_OPS)[number];

/**
 * The library backend a group's agents run its ops with: `nccl` (each agent's GPU, through its
 * sidecar) when every placed agent has a working nccl backend, else `tcp` (shared memory between
 * agents of one host). A member may ask for one at join; `auto` (the default) takes nccl when
 * enough idle agents have it.
 */
export const SERVICE_GROUP_BACKENDS = ['tcp', 'nccl'] as const;
export const ServiceGroupBackendSchema = z.enum(SERVICE_GROUP_BACKENDS);
export type ServiceGroupBackend = z.infer<typeof ServiceGroupBackendSchema>;
export const ServiceGroupBackendRequestSchema = z.enum(['auto', ...SERVICE_GROUP_BACKENDS]);
export type ServiceGroupBackendRequest = z.infer<typeof ServiceGroupBackendRequestSchema>;

/** A group's name: a subject token and KV key segment, short enough to leave room for the round. */
export const ServiceGroupNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9-]{1,48}$/, { error: (iss) => `${JSON.stringify(iss.input)}: letters, digits and - only (1..48)` });

/**
 * The largest op (or result) a member worker or a member takes, by default: its data, and what the
 * op needs by serviceGroupElements (members and agents may set their own, up to SERVICE_GROUP_BYTES_LIMIT).
 */
export const SERVICE_GROUP_MAX_BYTES = 1024 ** 3;
/** No op's data, result or element count is ever above this (the schemas refuse it). */
export const SERVICE_GROUP_BYTES_LIMIT = 2 ** 36;
/** A group member's or agent's 32-byte key in standard base64 (SERVICE_GROUP_KEY_PATTERN of service-groups-auth.ts). */
const Key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/, { error: () => '32 bytes in base64 (44 characters)' });

/** How long an elastic round ({min, max}) waits for more members once `min` joined, by default (torch's last call). */
export const SERVICE_GROUP_LAST_CALL_MS = 30_000;

export const ServiceGroupJoinSchema = z
  .object({
    name: ServiceGroupNameSchema,
    /** a fixed world size: the round is placed when this many members joined */
    size: z.number().int().min(1).max(1024).optional(),
    /** an elastic round: placed at once when `max` joined, or `lastCallMs` after `min` joined with everyone then joined */
    min: z.number().int().min(1).max(1024).optional(),
    max: z.number().int().min(1).max(1024).optional(),
    lastCallMs: z.number().int().min(0).max(3600_000).optional(),
    /** the joining member's id, unique among the group's members (a random id per join) */
    member: KvIdSchema,
    /** shown in errors naming this member and in the group's record */
    label: z.string().min(1).max(128).optional(),
    /** the member's host identity (the library's hostIdentity()): an idle agent on the same host is preferred */
    hostId: z.string().max(256).optional(),
    /** the backend the group must run on (default auto); members asking for tcp and nccl conflict */
    backend: ServiceGroupBackendRequestSchema.optional(),
    /**
     * 32 random bytes (base64) only this member knows: the placement carries the group's secret
     * sealed under it (ServiceGroupPlaced.sealed). A coordinator that authenticates groups refuses a join
     * without one.
     */
    key: Key.optional(),
    /** names this join: a retry with the same key gets the same membership, never a second one (idempotency.ts) */
    idempotencyKey: IdempotencyKeySchema.optional(),
  })
  .superRefine((j, ctx) => {
    const elastic = j.min !== undefined || j.max !== undefined;
    if (elastic === (j.size !== undefined)) ctx.addIssue({ code: 'custom', message: 'give either size, or min and max' });
    else if (elastic && (j.min === undefined || j.max === undefined || j.min > j.max))
      ctx.addIssue({ code: 'custom', message: `min and max both, min <= max (got min ${j.min}, max ${j.max})` });
    else if (!elastic && j.lastCallMs !== undefined) ctx.addIssue({ code: 'custom', message: 'lastCallMs is for min/max rounds' });
  });
export type ServiceGroupJoin = z.infer<typeof ServiceGroupJoinSchema>;

export const ServiceGroupJoinReplySchema = z.object({
  ok: z.literal(true),
  name: z.string(),
  round: z.number().int().positive(),
  joined: z.number().int().positive(),
});
export type ServiceGroupJoinReply = z.infer<typeof ServiceGroupJoinReplySchema>;

export const ServiceGroupLeaveSchema = z.object({ name: ServiceGroupNameSchema, member: KvIdSchema });
export type ServiceGroupLeave = z.infer<typeof ServiceGroupLeaveSchema>;

export const ServiceGroupMemberSchema = z.object({
  rank: z.number().int().min(0),
  member: z.string(),
  label: z.string().optional(),
  /** the agent that runs this member's ops */
  agentId: z.string(),
  agentName: z.string(),
  /** the member shares a host with its agent */
  local: z.boolean().optional(),
});
export type ServiceGroupMember = z.infer<typeof ServiceGroupMemberSchema>;

/**
 * The round's placement (published on svc.placed.<name>, which every client may read), or why it
 * could not be placed. It holds nothing that lets a stranger take part: the group's secret only
 * sealed per member, the store prefix only in the agents' events.
 */
export const ServiceGroupPlacedSchema = z.object({
  name: z.string(),
  round: z.number().int().positive(),
  /** `<name>_<round>`: the token of the group's subjects */
  groupId: z.string(),
  size: z.number().int().positive(),
  /** in rank order; empty when `error` says why the round was not placed */
  members: z.array(ServiceGroupMemberSchema),
  /** the backend the agents run the group's ops with; absent (a round not placed, an older coordinator): tcp */
  backend: ServiceGroupBackendSchema.optional(),
  error: z.string().optional(),
  /** with `error`: the member ids of the round that was not placed */
  joined: z.array(z.string()).optional(),
  /**
   * On svc.placed only, in rank order: the group's secret G sealed for each member under its join
   * key (sealServiceGroupSecret: base64 of IV, AES-256-GCM ciphertext and tag, bound to groupId and rank)
   */
  sealed: z.array(z.string().max(128)).optional(),
});
export type ServiceGroupPlaced = z.infer<typeof ServiceGroupPlacedSchema>;

/** One op of a member, in its order (seq 1, 2, …), followed by `bytes` of data in chunks. */
export const ServiceGroupOpSchema = z.object({
  seq: z.number().int().positive(),
  op: z.enum(SERVICE_GROUP_OPS),
  dtype: z.enum(DTYPES as unknown as [string, ...string[]]),
  /** elements of one rank's tensor: the tensor (reduceScatter: the output; allToAll: one rank's chunk); 0 for barrier */
  count: z.number().int().min(0).max(SERVICE_GROUP_BYTES_LIMIT),
  /** allReduce, reduce, reduceScatter */
  redop: z.enum(REDUCE_OPS as unknown as [string, ...string[]]).optional(),
  /** broadcast, scatter: the rank whose data is sent */
  src: z.number().int().min(0).optional(),
  /** reduce, gather: the rank that gets the result */
  dst: z.number().int().min(0).optional(),
  /** the op's deadline on the agents, ms */
  timeoutMs: z
    .number()
    .int()
    .positive()
    .max(24 * 3600_000),
  /** the data chunks that follow: serviceGroupBytes(op) */
  bytes: z.number().int().min(0).max(SERVICE_GROUP_BYTES_LIMIT),
});
export type ServiceGroupOp = z.infer<typeof ServiceGroupOpSchema>;

/**
 * What a member sends (`in`) and gets back (`out`) for an op, in elements of one rank's tensor:
 * the tensor itself, one per rank (`size`: the root's list, reduceScatter's and allToAll's input,
 * allGather's and allToAll's output), or nothing.
 */
export function serviceGroupElements(op: Pick<ServiceGroupOp, 'op' | 'count' | 'src' | 'dst'>, rank: number, size: number): { in: number; out: number } {
  const n = op.count;
  switch (op.op) {
    case 'allReduce':
    case 'broadcast':
      return { in: n, out: n };
    case 'reduce':
      return { in: n, out: rank === op.dst ? n : 0 };
    case 'allGather':
      return { in: n, out: n * size };
    case 'gather':
      return { in: n, out: rank === op.dst ? n * size : 0 };
    case 'scatter':
      return { in: rank === op.src ? n * size : 0, out: n };
    case 'reduceScatter':
      return { in: n * size, out: n };
    case 'allToAll':
      return { in: n * size, out: n * size };
    case 'barrier':
      return { in: 0, out: 0 };
  }
}

/** The library's typed error, by class name (DistTimeoutError, PeerFailureError, CollectiveMismatchError, …). */
export const ServiceGroupErrorSchema = z.object({
  name: z.string(),
  code: z.string().optional(),
  message: z.string(),
  /** the ranks it is about (a lost peer) */
  peers: z.array(z.number().int().min(0)).optional(),
});
export type ServiceGroupError = z.infer<typeof ServiceGroupErrorSchema>;

/**
 * Where an op's time went on the agent, as wall-clock times in ms since the epoch with a fraction
 * (performance.timeOrigin + performance.now()): its last byte arrived, the op started on the data
 * plane (after the member's earlier ops), and it ended there.
 */
export const ServiceGroupTimingSchema = z.object({ receivedMs: z.number(), startedMs: z.number(), endedMs: z.number() });
export type ServiceGroupTiming = z.infer<typeof ServiceGroupTimingSchema>;

/** An op's outcome, followed (ok) by `bytes` of result data in chunks. */
export const ServiceGroupResultSchema = z.union([
  z.object({
    seq: z.number().int().positive(),
    ok: z.literal(true),
    bytes: z.number().int().min(0).max(SERVICE_GROUP_BYTES_LIMIT),
    timing: ServiceGroupTimingSchema.optional(),
  }),
  z.object({ seq: z.number().int().positive(), ok: z.literal(false), error: ServiceGroupErrorSchema }),
]);
export type ServiceGroupResult = z.infer<typeof ServiceGroupResultSchema>;

export const ServiceGroupHeartbeatSchema = z.object({
  rank: z.number().int().min(0),
  role: z.enum(['member', 'agent']),
  /** agent: its process group is up and it takes ops */
  ready: z.boolean().optional(),
  /** agent whose member shares its host: the Unix socket of the local path (ServiceGroupLocalFrame) */
  socket: z.string().max(512).optional(),
  /** counts up per sender (1, 2, …): a heartbeat not above the last one heard from it is a replay, ignored */
  n: z.number().int().positive().optional(),
  /**
   * agent: how often its NATS connection came back after dropping. What its member published
   * while it was away is lost (core NATS keeps nothing), so the member sends its unanswered ops
   * again when this goes up.
   */
  up: z.number().int().min(0).optional(),
});
export type ServiceGroupHeartbeat = z.infer<typeof ServiceGroupHeartbeatSchema>;

/**
 * The local path, for a member on its agent's host: newline-delimited JSON frames on the Unix
 * socket its own agent's authenticated heartbeat names, with the data in a shared memory segment
 * of the member's (a memfd the agent maps through /proc/<pid>/fd/<fd>), so no byte crosses NATS
 * or the socket. Both sides first prove they hold the group's secret: the member says `hello`
 * (its member id and a nonce), the agent answers `challenge` (its proof over both nonces and a
 * nonce of its own; serviceGroupLocalProof), the member checks it and sends `proof` (its own, and its
 * segment), the agent checks that and answers `ok` or `refused` (the member then stays on NATS).
 * Then an op is a ServiceGroupOp whose `bytes` are at the segment's start, and its result a ServiceGroupResult
 * whose `bytes` are written there. `segment` replaces a segment grown for a larger op (answered `ok`).
 */
const Nonce = z.string().max(64);
const Proof = z.string().max(64);
const SegmentBytes = z.number().int().positive().max(SERVICE_GROUP_BYTES_LIMIT);
export const ServiceGroupLocalHelloSchema = z.object({ type: z.literal('hello'), member: z.string().max(128), nonce: Nonce });
export const ServiceGroupLocalProofSchema = z.object({
  type: z.literal('proof'),
  proof: Proof,
  pid: z.number().int().positive(),
  fd: z.number().int().min(0),
  bytes: SegmentBytes,
});
export const ServiceGroupLocalSegmentSchema = z.object({
  type: z.literal('segment'),
  pid: z.number().int().positive(),
  fd: z.number().int().min(0),
  bytes: SegmentBytes,
});
export const ServiceGroupLocalOpSchema = z.object({ type: z.literal('op'), op: ServiceGroupOpSchema });
export const ServiceGroupLocalToAgentSchema = z.discriminatedUnion('type', [
  ServiceGroupLocalHelloSchema,
  ServiceGroupLocalProofSchema,
  ServiceGroupLocalSegmentSchema,
  ServiceGroupLocalOpSchema,
]);
export type ServiceGroupLocalToAgent = z.infer<typeof ServiceGroupLocalToAgentSchema>;
export const ServiceGroupLocalToMemberSchema = z.union([
  z.object({ type: z.literal('challenge'), nonce: Nonce, proof: Proof }),
  z.object({ type: z.literal('ok') }),
  z.object({ type: z.literal('refused'), message: z.string().max(1024) }),
  z.object({ type: z.literal('result'), result: ServiceGroupResultSchema }),
]);
export type ServiceGroupLocalToMember = z.infer<typeof ServiceGroupLocalToMemberSchema>;

/** The group is over for everyone: who left or was lost, or the op failure that broke it. */
export const ServiceGroupEndSchema = z.object({
  groupId: z.string(),
  reason: z.enum(['left', 'lost', 'failed']),
  /** the participant it is about, in words: `member "w3" (rank 3)`, `agent agent-2 (rank 2, member "w2")` */
  who: z.string().optional(),
  rank: z.number().int().min(0).optional(),
  error: ServiceGroupErrorSchema.optional(),
  /**
   * `failed`: the op that failed; the ops before it ran, and their results still arrive.
   * `left`: the leaver's last op; it took part in every op up to this one, which still complete.
   */
  seq: z.number().int().min(1).optional(),
});
export type ServiceGroupEnd = z.infer<typeof ServiceGroupEndSchema>;

/** A round in the coordinator's state bucket (KV_KEYS.serviceGroup(name)). */
export const ServiceGroupRoundSchema = z.object({
  name: z.string(),
  /** the world size: fixed, or an elastic round's max until it closes with the members it has */
  size: z.number().int().positive(),
  /** an elastic round's bounds and last call */
  elastic: z.object({ min: z.number().int().positive(), max: z.number().int().positive(), lastCallMs: z.number().int().min(0) }).optional(),
  /** when an elastic round that reached min closes (ISO) */
  closesAt: z.string().optional(),
  round: z.number().int().positive(),
  /** the backend a member asked for at join (absent: auto) */
  backend: ServiceGroupBackendSchema.optional(),
  /** waiting for members; queued: full, waiting for enough idle agents; placed; ended */
  state: z.enum(['waiting', 'queued', 'placed', 'ended']),
  /** the members that joined; `key` (their join key) only until the round is placed */
  joined: z.array(z.object({ member: z.string(), label: z.string().optional(), hostId: z.string().optional(), key: Key.optional() })),
  placed: ServiceGroupPlacedSchema.optional(),
  end: ServiceGroupEndSchema.optional(),
  /** placed: the group's secret G (base64) and its process group's store prefix; only in the coordinator's bucket */
  secret: Key.optional(),
  storePrefix: z.string().optional(),
  /** when the round was placed, and when it ended (ISO time) */
  placedAt: z.string().optional(),
  endedAt: z.string().optional(),
  updatedAt: z.string(),
});
export type ServiceGroupRound = z.infer<typeof ServiceGroupRoundSchema>;

/**
 * The agent's part of a placed group (AgentEvent 'svc-member', on the agent's own events subject):
 * the group's secret G in the clear and the process group's store prefix, which nobody else gets.
 */
export const ServiceGroupAgentEventSchema = z.object({
  type: z.literal('svc-member'),
  rank: z.number().int().min(0),
  placed: ServiceGroupPlacedSchema,
  secret: Key,
  storePrefix: z.string().max(256),
});
export type ServiceGroupAgentEvent = z.infer<typeof ServiceGroupAgentEventSchema>;

/** The coordinator's request on a group's status subject: its reply subject again, under the MAC. */
export const ServiceGroupStatusRequestSchema = z.object({ reply: z.string().max(256) });

/** Everything on an agent's events subject: group membership (agents.ts) and service placements. */
export const AgentNotificationSchema = z.discriminatedUnion('type', [AgentEventSchema, ServiceGroupAgentEventSchema]);
export type AgentNotification = z.infer<typeof AgentNotificationSchema>;

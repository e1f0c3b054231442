// What an operator sees of collectives as a service: the groups (GET /service-groups, cmesh
// status) and the ops in flight of a placed group (GET /service-groups/{name}), which the
// coordinator asks the group's member workers for on clusterNames(cluster).serviceGroups.status(groupId)
// (a request every rank answers with ServiceGroupRankStatus).
import { z } from 'zod';
import {
  SERVICE_GROUP_OPS,
  ServiceGroupBackendSchema,
  ServiceGroupEndSchema,
  ServiceGroupMemberSchema,
  ServiceGroupNameSchema,
  ServiceGroupRoundSchema,
} from './service-groups';

/** How long the coordinator waits for the ranks' ServiceGroupRankStatus by default, and at most (ms). */
export const SERVICE_GROUP_STATUS_DEFAULT_MS = 1000;
export const SERVICE_GROUP_STATUS_MAX_MS = 10_000;

/** The op a member worker runs now: its data has arrived and the library is running it since `since`. */
export const ServiceGroupRunningOpSchema = z.object({
  op: z.enum(SERVICE_GROUP_OPS),
  seq: z.number().int().positive(),
  dtype: z.string(),
  /** elements of one rank's tensor, as in ServiceGroupOp */
  count: z.number().int().min(0),
  /** when the op started running on the agent (ISO time) */
  since: z.string(),
});
export type ServiceGroupRunningOp = z.infer<typeof ServiceGroupRunningOpSchema>;

/** One rank's answer on the group's status subject. */
export const ServiceGroupRankStatusSchema = z.object({
  rank: z.number().int().min(0),
  /** the op running now, or null between ops */
  running: ServiceGroupRunningOpSchema.nullable(),
  /** ops received whose turn (or data) has not come yet */
  queued: z.number().int().min(0),
  /** ops finished, successfully or not */
  opsDone: z.number().int().min(0),
  /** tensor bytes of the ops finished (nccl-tests' size: the larger of an op's buffers, the root's for gather and scatter) */
  bytes: z.number().int().min(0),
  /** the backend this rank's process group runs on (the library's getBackend()), and its GPU with nccl */
  backend: ServiceGroupBackendSchema.optional(),
  device: z.number().int().min(0).optional(),
});
export type ServiceGroupRankStatus = z.infer<typeof ServiceGroupRankStatusSchema>;

/** A service group's current round, as GET /service-groups lists it. */
export const ServiceGroupSummarySchema = z.object({
  name: z.string(),
  round: z.number().int().positive(),
  state: z.enum(['waiting', 'queued', 'placed', 'ended']),
  /** the world size (an elastic round: its max until it closes with the members it has) */
  size: z.number().int().positive(),
  /** placed: the backend its agents run it with; before that, the one its members asked for (absent: auto) */
  backend: ServiceGroupBackendSchema.optional(),
  /** an elastic round's bounds and last call */
  elastic: ServiceGroupRoundSchema.shape.elastic,
  /** when an elastic round that reached its min closes (ISO time) */
  closesAt: z.string().optional(),
  /** members joined (waiting, queued) */
  joined: z.number().int().min(0),
  /** in rank order once placed; before that the members that joined, with no rank or agent */
  members: z.array(ServiceGroupMemberSchema.partial({ rank: true, agentId: true, agentName: true })),
  placedAt: z.string().optional(),
  endedAt: z.string().optional(),
  /** why the group ended (left, lost, failed), who it is about, and the error */
  end: ServiceGroupEndSchema.omit({ groupId: true }).optional(),
  /** why the round could not be placed (ended without running) */
  error: z.string().optional(),
  updatedAt: z.string(),
});
export type ServiceGroupSummary = z.infer<typeof ServiceGroupSummarySchema>;

/** GET /service-groups/{name}: the group, and for a placed one what each rank runs now. */
export const ServiceGroupDetailSchema = ServiceGroupSummarySchema.extend({
  inFlight: z
    .object({
      /** the ranks that answered, in rank order */
      ranks: z.array(ServiceGroupRankStatusSchema),
      /** the ranks that did not answer within waitedMs */
      missing: z.array(z.number().int().min(0)),
      waitedMs: z.number().int().min(0),
    })
    .optional(),
});
export type ServiceGroupDetail = z.infer<typeof ServiceGroupDetailSchema>;

export const ServiceGroupGetSchema = z.object({
  name: ServiceGroupNameSchema,
  /** how long to wait for the ranks' answers (ms) */
  waitMs: z.coerce.number().int().min(50).max(SERVICE_GROUP_STATUS_MAX_MS).optional(),
});
export type ServiceGroupGet = z.infer<typeof ServiceGroupGetSchema>;

// What an operator sees of collectives as a service: the groups (GET /service-groups, cmesh
// status) and the ops in flight of a placed group (GET /service-groups/{name}), which the
// coordinator asks the group's member workers for on clusterNames(cluster).svc.status(groupId)
// (a request every rank answers with SvcRankStatus).
import { z } from 'zod';
import { SVC_OPS, SvcBackendSchema, SvcEndSchema, SvcMemberSchema, SvcNameSchema, SvcRoundSchema } from './service';

/** How long the coordinator waits for the ranks' SvcRankStatus by default, and at most (ms). */
export const SVC_STATUS_DEFAULT_MS = 1000;
export const SVC_STATUS_MAX_MS = 10_000;

/** The op a member worker runs now: its data has arrived and the library is running it since `since`. */
export const SvcRunningOpSchema = z.object({
  op: z.enum(SVC_OPS),
  seq: z.number().int().positive(),
  dtype: z.string(),
  /** elements of one rank's tensor, as in SvcOp */
  count: z.number().int().min(0),
  /** when the op started running on the agent (ISO time) */
  since: z.string(),
});
export type SvcRunningOp = z.infer<typeof SvcRunningOpSchema>;

/** One rank's answer on the group's status subject. */
export const SvcRankStatusSchema = z.object({
  rank: z.number().int().min(0),
  /** the op running now, or null between ops */
  running: SvcRunningOpSchema.nullable(),
  /** ops received whose turn (or data) has not come yet */
  queued: z.number().int().min(0),
  /** ops finished, successfully or not */
  opsDone: z.number().int().min(0),
  /** tensor bytes of the ops finished (nccl-tests' size: the larger of an op's buffers, the root's for gather and scatter) */
  bytes: z.number().int().min(0),
  /** the backend this rank's process group runs on (the library's getBackend()), and its GPU with nccl */
  backend: SvcBackendSchema.optional(),
  device: z.number().int().min(0).optional(),
});
export type SvcRankStatus = z.infer<typeof SvcRankStatusSchema>;

/** A service group's current round, as GET /service-groups lists it. */
export const SvcGroupSchema = z.object({
  name: z.string(),
  round: z.number().int().positive(),
  state: z.enum(['waiting', 'queued', 'placed', 'ended']),
  /** the world size (an elastic round: its max until it closes with the members it has) */
  size: z.number().int().positive(),
  /** placed: the backend its agents run it with; before that, the one its members asked for (absent: auto) */
  backend: SvcBackendSchema.optional(),
  /** an elastic round's bounds and last call */
  elastic: SvcRoundSchema.shape.elastic,
  /** when an elastic round that reached its min closes (ISO time) */
  closesAt: z.string().optional(),
  /** members joined (waiting, queued) */
  joined: z.number().int().min(0),
  /** in rank order once placed; before that the members that joined, with no rank or agent */
  members: z.array(SvcMemberSchema.partial({ rank: true, agentId: true, agentName: true })),
  placedAt: z.string().optional(),
  endedAt: z.string().optional(),
  /** why the group ended (left, lost, failed), who it is about, and the error */
  end: SvcEndSchema.omit({ groupId: true }).optional(),
  /** why the round could not be placed (ended without running) */
  error: z.string().optional(),
  updatedAt: z.string(),
});
export type SvcGroup = z.infer<typeof SvcGroupSchema>;

/** GET /service-groups/{name}: the group, and for a placed one what each rank runs now. */
export const SvcGroupDetailSchema = SvcGroupSchema.extend({
  inFlight: z
    .object({
      /** the ranks that answered, in rank order */
      ranks: z.array(SvcRankStatusSchema),
      /** the ranks that did not answer within waitedMs */
      missing: z.array(z.number().int().min(0)),
      waitedMs: z.number().int().min(0),
    })
    .optional(),
});
export type SvcGroupDetail = z.infer<typeof SvcGroupDetailSchema>;

export const SvcGroupGetSchema = z.object({
  name: SvcNameSchema,
  /** how long to wait for the ranks' answers (ms) */
  waitMs: z.coerce.number().int().min(50).max(SVC_STATUS_MAX_MS).optional(),
});
export type SvcGroupGet = z.infer<typeof SvcGroupGetSchema>;

// Rendezvous with torchrun's c10d semantics: a run id, MIN:MAX nodes, a last-call window once MIN
// have joined, numbered rounds, deterministic ranks (sorted node ids), closed rounds, and a new
// round when a member is lost.
import { z } from 'zod';
import { KvIdSchema } from './agents';
import { DEFAULT_CLUSTER, clusterNames } from './cluster';

/** The default cluster's rendezvous subjects (another cluster's: clusterNames(cluster).rdzv). */
export const RDZV_SUBJECTS = clusterNames(DEFAULT_CLUSTER).rdzv;

/** the run id is a KV key segment (rdzv.<runId>) */
export const RunIdSchema = KvIdSchema;
/** node ids are stored in the record only, so they may also hold . and : (host:port, fqdn) */
export const NodeIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, { error: (iss) => `${JSON.stringify(iss.input)}: letters, digits, _ . : and - only (1..128)` });

export const RdzvJoinSchema = z
  .object({
    runId: RunIdSchema,
    nodeId: NodeIdSchema,
    minNodes: z.number().int().positive(),
    maxNodes: z.number().int().positive(),
    lastCallMs: z.number().int().min(0).max(3_600_000).default(1000),
    /** answer with RdzvBriefReply (this node's rank and the round's size) instead of the whole round */
    brief: z.boolean().optional(),
  })
  .refine((j) => j.minNodes <= j.maxNodes, { message: 'minNodes must be <= maxNodes' });
export type RdzvJoin = z.infer<typeof RdzvJoinSchema>;

export const RdzvGetSchema = z.object({ runId: RunIdSchema });
export const RdzvLeaveSchema = z.object({ runId: RunIdSchema, nodeId: NodeIdSchema, reason: z.string().default('left') });

export const RdzvRecordSchema = z.object({
  runId: z.string(),
  round: z.number().int().min(0),
  state: z.enum(['open', 'closed']),
  minNodes: z.number().int(),
  maxNodes: z.number().int(),
  lastCallMs: z.number().int(),
  /** join order of this round */
  participants: z.array(z.object({ nodeId: z.string(), joinedAt: z.string() })),
  /** set once MIN have joined: the round closes at this time (ms since epoch) */
  lastCallDeadline: z.number().optional(),
  closedAt: z.string().optional(),
  /** node id -> rank, once closed (node ids sorted) */
  ranks: z.record(z.string(), z.number().int()).optional(),
  /** nodes that came after the round closed wait for the next one */
  waiting: z.array(z.string()).default([]),
});
export type RdzvRecord = z.infer<typeof RdzvRecordSchema>;

export const RdzvReplySchema = z.object({
  ok: z.literal(true),
  record: RdzvRecordSchema,
  /** this node's rank when the round is closed and it is a member */
  rank: z.number().int().optional(),
});
export type RdzvReply = z.infer<typeof RdzvReplySchema>;

/**
 * The answer to a join with `brief`: what a node needs (its rank and the world size, like c10d
 * gives), a few bytes whatever the size, where the whole round is O(nodes) for each of the nodes.
 */
export const RdzvBriefReplySchema = z.object({
  ok: z.literal(true),
  runId: z.string(),
  round: z.number().int().min(0),
  state: z.enum(['open', 'closed']),
  /** members of the round so far (its world size once closed) */
  size: z.number().int().min(0),
  /** this node's rank when the round is closed and it is a member */
  rank: z.number().int().optional(),
  /** this node came after the round closed and waits for the next one */
  waiting: z.boolean(),
});
export type RdzvBriefReply = z.infer<typeof RdzvBriefReplySchema>;

export function briefReply(r: RdzvReply, nodeId: string): RdzvBriefReply {
  const { record } = r;
  return {
    ok: true,
    runId: record.runId,
    round: record.round,
    state: record.state,
    size: record.participants.length,
    ...(r.rank !== undefined ? { rank: r.rank } : {}),
    waiting: record.waiting.includes(nodeId),
  };
}

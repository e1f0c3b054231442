// Process groups the coordinator allocates for a member list: an id, a store prefix for the
// members' bootstrap keys, membership kept in KV and told to each member.
import { z } from 'zod';
import { AgentIdSchema, KvIdSchema } from './agents';
import { DEFAULT_CLUSTER, clusterNames } from './cluster';

/** The default cluster's group subjects (another cluster's: clusterNames(cluster).groups). */
export const GROUP_SUBJECTS = clusterNames(DEFAULT_CLUSTER).groups;

export const GroupCreateSchema = z.object({
  /** agent ids in rank order */
  members: z
    .array(AgentIdSchema)
    .min(1)
    .max(4096)
    .refine((m) => new Set(m).size === m.length, 'members must be distinct'),
  name: z.string().max(128).optional(),
});
export type GroupCreate = z.infer<typeof GroupCreateSchema>;

export const GroupIdSchema = KvIdSchema;

export const GroupGetSchema = z.object({ id: GroupIdSchema });

export const GroupRecordSchema = z.object({
  id: z.string(),
  name: z.string().optional(),
  members: z.array(z.string()),
  storePrefix: z.string(),
  createdAt: z.string(),
});
export type GroupRecord = z.infer<typeof GroupRecordSchema>;

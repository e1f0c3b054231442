// JetStream KV layout of a cluster: one bucket, keys by kind. Key characters are limited to
// [-/_=.a-zA-Z0-9], so ids are restricted to those (see the schemas).
export const DEFAULT_CLUSTER = 'default';

export function clusterBucket(cluster: string): string {
  return `cmesh_${cluster}`;
}

export const KV_KEYS = {
  agent: (agentId: string) => `agents.${agentId}`,
  agentsPrefix: 'agents.',
  rendezvous: (runId: string) => `rdzv.${runId}`,
  group: (id: string) => `groups.${id}`,
  groupsPrefix: 'groups.',
  groupCounter: 'counters.groups',
  leader: 'leader',
} as const;


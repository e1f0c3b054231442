// The keys of a cluster's state bucket (clusterNames(cluster).buckets.state), by kind. Key
// characters are limited to [-/_=.a-zA-Z0-9], so ids are restricted to those (see the schemas).

export const KV_KEYS = {
  agent: (agentId: string) => `agents.${agentId}`,
  agentsPrefix: 'agents.',
  rendezvous: (runId: string) => `rdzv.${runId}`,
  group: (id: string) => `groups.${id}`,
  groupsPrefix: 'groups.',
  groupCounter: 'counters.groups',
  leader: 'leader',
  /** a service group's current round (service-groups.ts ServiceGroupRound) */
  serviceGroup: (name: string) => `svc.${name}`,
  serviceGroupsPrefix: 'svc.',
} as const;

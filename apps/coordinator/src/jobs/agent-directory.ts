// What the jobs module needs to know about agents and groups; the coordinator's agents and
// groups modules are the source (see jobs.module.ts for the binding).
export interface AgentView {
  agentId: string;
  name: string;
  /** registered and heartbeating */
  alive: boolean;
  host?: string;
  /** the node it runs on (CMESH_NODE_NAME); absent: an agent that did not say, a node of its own */
  node?: string;
  lastHeartbeat?: string;
  /** the service group it runs a member of now: it takes no job until that group ends */
  serving?: string;
}

export abstract class AgentDirectory {
  abstract agents(): Promise<AgentView[]>;
  /** agent ids of a group's members in rank order, or null when there is no such group */
  abstract groupMembers(groupId: string): Promise<string[] | null>;
}

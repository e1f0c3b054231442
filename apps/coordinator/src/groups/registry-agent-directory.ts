// Binds the jobs module's view of agents and groups to the registry, the groups service and the
// service groups (an agent serving one takes no job).
import { Injectable } from '@nestjs/common';
import { AgentDirectory, AgentView } from '../jobs/agent-directory';
import { GroupsService } from './groups.service';
import { AgentsService } from '../agents/agents.service';
import { ServiceGroupsService } from '../service-groups/service-groups.service';

@Injectable()
export class RegistryAgentDirectory extends AgentDirectory {
  constructor(
    private readonly registry: AgentsService,
    private readonly groups: GroupsService,
    private readonly service: ServiceGroupsService,
  ) {
    super();
  }

  async agents(): Promise<AgentView[]> {
    const serving = await this.service.servingAgents();
    return (await this.registry.list()).map((a) => ({
      agentId: a.agentId,
      name: a.name,
      alive: a.state !== 'lost',
      host: a.host,
      ...(a.node ? { node: a.node } : {}),
      lastHeartbeat: a.lastHeartbeat,
      ...(serving.has(a.agentId) ? { serving: serving.get(a.agentId) } : {}),
    }));
  }

  async groupMembers(groupId: string): Promise<string[] | null> {
    return (await this.groups.find(groupId))?.members ?? null;
  }
}

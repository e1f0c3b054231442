// Binds the jobs module's view of agents and groups to the registry and the groups service.
import { Injectable } from '@nestjs/common';
import { AgentDirectory, AgentView } from '../jobs/agent-directory';
import { GroupsService } from './groups.service';
import { AgentsService } from '../agents/agents.service';

@Injectable()
export class RegistryAgentDirectory extends AgentDirectory {
  constructor(
    private readonly registry: AgentsService,
    private readonly groups: GroupsService,
  ) {
    super();
  }

  async agents(): Promise<AgentView[]> {
    return (await this.registry.list()).map((a) => ({ agentId: a.agentId, name: a.name, alive: a.state !== 'lost', host: a.host, lastHeartbeat: a.lastHeartbeat }));
  }

  async groupMembers(groupId: string): Promise<string[] | null> {
    return (await this.groups.find(groupId))?.members ?? null;
  }
}

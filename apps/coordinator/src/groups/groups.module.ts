import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { ServiceGroupsModule } from '../service-groups/service-groups.module';
import { GroupsController } from './groups.controller';
import { GroupsNats } from './groups.nats';
import { GroupsService } from './groups.service';
import { RegistryAgentDirectory } from './registry-agent-directory';

@Module({
  imports: [AgentsModule, ServiceGroupsModule],
  controllers: [GroupsController, GroupsNats],
  providers: [GroupsService, RegistryAgentDirectory],
  exports: [GroupsService, RegistryAgentDirectory],
})
export class GroupsModule {}

import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GroupsController } from './groups.controller';
import { GroupsService } from './groups.service';
import { RegistryAgentDirectory } from './registry-agent-directory';

@Module({ imports: [AgentsModule], controllers: [GroupsController], providers: [GroupsService, RegistryAgentDirectory], exports: [GroupsService, RegistryAgentDirectory] })
export class GroupsModule {}

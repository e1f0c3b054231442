import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { ServiceGroupsController } from './service-groups.controller';
import { ServiceGroupsView } from './service-groups.view';
import { ServiceGroupsNats } from './service-groups.nats';
import { ServiceGroupsService } from './service-groups.service';

/** Collectives as a service: named groups of any NATS client, placed on the agents. */
@Module({
  imports: [AgentsModule],
  controllers: [ServiceGroupsNats, ServiceGroupsController],
  providers: [ServiceGroupsService, ServiceGroupsView],
  exports: [ServiceGroupsService, ServiceGroupsView],
})
export class ServiceGroupsModule {}

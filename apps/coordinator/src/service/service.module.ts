import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { ServiceNats } from './service.nats';
import { ServiceGroupsService } from './service.service';

/** Collectives as a service: named groups of any NATS client, placed on the agents. */
@Module({ imports: [AgentsModule], controllers: [ServiceNats], providers: [ServiceGroupsService], exports: [ServiceGroupsService] })
export class ServiceModule {}

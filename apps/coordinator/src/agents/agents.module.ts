import { Module } from '@nestjs/common';
import { LeaderService } from '../leader/leader.service';
import { AgentsController } from './agents.controller';
import { AgentsNats } from './agents.nats';
import { AgentsService } from './agents.service';

@Module({ controllers: [AgentsController, AgentsNats], providers: [LeaderService, AgentsService], exports: [LeaderService, AgentsService] })
export class AgentsModule {}

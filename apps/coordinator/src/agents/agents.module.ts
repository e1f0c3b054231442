import { Module } from '@nestjs/common';
import { LeaderService } from '../leader/leader.service';
import { AgentsController } from './agents.controller';
import { AgentsService } from './agents.service';

@Module({ controllers: [AgentsController], providers: [LeaderService, AgentsService], exports: [LeaderService, AgentsService] })
export class AgentsModule {}

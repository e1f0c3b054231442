import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { AgentsModule } from '../agents/agents.module';
import { HealthController } from './health.controller';

@Module({ imports: [TerminusModule, AgentsModule], controllers: [HealthController] })
export class HealthModule {}

import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GroupsModule } from '../groups/groups.module';
import { RendezvousModule } from '../rendezvous/rendezvous.module';
import { CoordinatorMetrics } from './coordinator-metrics';
import { MetricsController } from './metrics.controller';

@Module({
  imports: [AgentsModule, GroupsModule, RendezvousModule],
  controllers: [MetricsController],
  providers: [CoordinatorMetrics],
  exports: [CoordinatorMetrics],
})
export class MetricsModule {}

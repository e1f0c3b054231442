// Wiring is one import in the AppModule: this module serves /metrics and provides JOB_OBSERVER,
// which the job runner injects to report every size step and failure.
import { Module } from '@nestjs/common';
import { JOB_OBSERVER } from '../execution/tokens';
import { AgentMetrics } from './agent-metrics';
import { MetricsController } from './metrics.controller';

@Module({
  controllers: [MetricsController],
  providers: [AgentMetrics, { provide: JOB_OBSERVER, useExisting: AgentMetrics }],
  exports: [AgentMetrics, JOB_OBSERVER],
})
export class MetricsModule {}

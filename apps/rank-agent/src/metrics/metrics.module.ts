// Wiring is one import in the AppModule: this module serves /metrics and provides JOB_OBSERVER,
// which the job runner injects to report every size step and failure.
import { DynamicModule, Module } from '@nestjs/common';
import { JOB_OBSERVER } from '../execution/tokens';
import { AgentMetrics, METRICS_CLUSTER } from './agent-metrics';
import { MetricsController } from './metrics.controller';

@Module({})
export class MetricsModule {
  /** cluster: the `cluster` label of every series (the agent's CMESH_CLUSTER) */
  static forRoot(cluster: string): DynamicModule {
    return {
      module: MetricsModule,
      controllers: [MetricsController],
      providers: [{ provide: METRICS_CLUSTER, useValue: cluster }, AgentMetrics, { provide: JOB_OBSERVER, useExisting: AgentMetrics }],
      exports: [AgentMetrics, JOB_OBSERVER],
    };
  }
}

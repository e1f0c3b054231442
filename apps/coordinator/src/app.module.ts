// The coordinator: agents, rendezvous, groups, jobs and health on one NATS connection, every
// record in the cluster's JetStream KV buckets; every subject and bucket carries the cluster.
import { DynamicModule, Global, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiTokenGuard, ApiTokens } from './http/api-auth.guard';
import { AuthModule } from './http/auth.module';
import { LoggerModule } from 'nestjs-pino';
import { AgentsModule } from './agents/agents.module';
import { clusterNames, printableLogHooks } from '@cmesh/protocol';
import { CLUSTER_NAMES, COORDINATOR_CONFIG, CoordinatorConfig } from './config/coordinator-config';
import { GroupsModule } from './groups/groups.module';
import { RegistryAgentDirectory } from './groups/registry-agent-directory';
import { HealthModule } from './health/health.module';
import { AgentDirectory } from './jobs/agent-directory';
import { JobsModule } from './jobs/jobs.module';
import { JOBS_NATS, JOB_RESULT_SINK } from './jobs/tokens';
import { CoordinatorMetrics } from './metrics/coordinator-metrics';
import { MetricsModule } from './metrics/metrics.module';
import { NATS_CONNECTION, NatsModule } from './nats/nats.module';
import { RendezvousModule } from './rendezvous/rendezvous.module';
import { ScansModule } from './scans/scans.module';
import { ServiceGroupsModule } from './service-groups/service-groups.module';
import { StoresModule } from './stores/stores.module';
import { UiModule } from './ui/ui.module';
import { TraceModule } from './trace/trace.module';
import { ShutdownLog } from './shutdown-log';

@Global()
@Module({})
class ConfigModule {
  static forRoot(config: CoordinatorConfig): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        { provide: COORDINATOR_CONFIG, useValue: config },
        { provide: CLUSTER_NAMES, useValue: clusterNames(config.cluster) },
      ],
      exports: [COORDINATOR_CONFIG, CLUSTER_NAMES],
    };
  }
}

@Module({})
export class AppModule {
  static forRoot(config: CoordinatorConfig, tokens: ApiTokens = {}): DynamicModule {
    const jobs = JobsModule.forRoot({
      imports: [GroupsModule, MetricsModule],
      extraProviders: [{ provide: JOB_RESULT_SINK, useExisting: CoordinatorMetrics }],
      directory: { provide: AgentDirectory, useExisting: RegistryAgentDirectory },
      nats: { provide: JOBS_NATS, useExisting: NATS_CONNECTION },
      retention: { kept: config.jobsKept, maxAgeMs: config.jobsMaxAgeS * 1000 },
      limits: { maxBytes: config.jobMaxBytes, queueMax: config.jobQueueMax },
      cluster: config.cluster,
      replica: config.replicaId,
      claimStaleMs: config.claimStaleMs,
    });
    // fabric scans run their pairs as jobs of the same jobs module
    const scans = ScansModule.forRoot({ imports: [jobs, AgentsModule, MetricsModule] });
    const trace = TraceModule.forRoot(jobs);
    return {
      module: AppModule,
      providers: [{ provide: APP_GUARD, useClass: ApiTokenGuard }, ShutdownLog],
      imports: [
        ConfigModule.forRoot(config),
        AuthModule.forRoot(tokens),
        LoggerModule.forRoot({
          pinoHttp: {
            level: process.env.LOG_LEVEL ?? 'info',
            autoLogging: false,
            quietReqLogger: true,
            base: { service: 'cmesh-coordinator', replica: config.replicaId },
            hooks: printableLogHooks,
          },
        }),
        NatsModule,
        AgentsModule,
        RendezvousModule,
        GroupsModule,
        ServiceGroupsModule,
        StoresModule,
        // the same jobs module instance: a coordinator group's trace is its running jobs' ranks
        trace,
        HealthModule,
        MetricsModule,
        jobs,
        scans,
        UiModule.forRoot({ imports: [jobs, scans, trace, AgentsModule, GroupsModule, ServiceGroupsModule] }),
      ],
    };
  }
}

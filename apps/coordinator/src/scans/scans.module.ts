// Scans: REST (/scans) and NATS (<cluster>.scans.*), the schedule (leader only), the metrics.
// Pairs run as jobs of the jobs module, which `imports` must provide (the coordinator's one
// JobsModule), with the agents module (the leader) and the metrics module.
import { DynamicModule, Module, ModuleMetadata } from '@nestjs/common';
import { ClusterNames } from '@cmesh/protocol';
import { NatsConnection } from '@nats-io/nats-core';
import { CLUSTER_NAMES, COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ScanMetrics } from './scan-metrics';
import { ScanSchedule } from './scan-schedule';
import { ScanStore } from './scan-store';
import { ScansController } from './scans.controller';
import { ScansNats } from './scans.nats';
import { ScansService } from './scans.service';
import { InboundMessages } from '../nats/inbound-messages';

@Module({})
export class ScansModule {
  static forRoot(opts: { imports: ModuleMetadata['imports'] }): DynamicModule {
    return {
      module: ScansModule,
      imports: opts.imports,
      controllers: [ScansController, ScansNats],
      providers: [
        {
          provide: ScanStore,
          inject: [NATS_CONNECTION, CLUSTER_NAMES, COORDINATOR_CONFIG, InboundMessages],
          useFactory: (nc: NatsConnection, names: ClusterNames, config: CoordinatorConfig, inbound: InboundMessages) =>
            new ScanStore(nc, names.buckets.scans, config.scansKept, inbound.records(names.buckets.scans)),
        },
        ScansService,
        ScanSchedule,
        ScanMetrics,
      ],
      exports: [ScansService],
    };
  }
}

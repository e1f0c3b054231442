// Jobs: REST (/jobs) and NATS (cmesh.jobs.*) submission, dispatch to the rank agents, results in
// KV. forRoot takes where agents and groups come from and the NATS connection to use.
import { DynamicModule, Inject, Injectable, Module, ModuleMetadata, OnApplicationShutdown, Provider } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { ClusterNames, clusterNames } from '@cmesh/protocol';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { InboundMessages } from '../nats/inbound-messages';
import { AgentClaims } from './agent-claims';
import { AgentDirectory } from './agent-directory';
import { Clock, systemClock } from './clock';
import { JobBuckets } from './job-buckets';
import { JobsController } from './jobs.controller';
import { JobsNats } from './jobs.nats';
import { JobsService } from './jobs.service';
import { JobRetention, JobStore } from './job-store';
import { JobSecrets } from './job-secrets';
import { ReplicaLeases } from './replica-leases';
import { ReplicaRecovery } from './replica-recovery';
import { ReplicaUpkeep } from './replica-upkeep';
import { JOBS_NATS, JOB_CLOCK, JOB_CLUSTER, JOB_LIMITS, JOB_REPLICA, JOB_RETENTION } from './tokens';
import type { JobLimits } from './job-limits';
import { natsLogin } from '@cmesh/collectives';

export interface JobsModuleOptions {
  imports?: ModuleMetadata['imports'];
  /** binds AgentDirectory */
  directory: Provider;
  /** binds JOBS_NATS; default: a connection of its own to NATS_URL */
  nats?: Provider;
  natsUrl?: string;
  /** records kept and for how long (default DEFAULT_JOB_RETENTION) */
  retention?: JobRetention;
  /** the largest size and the queue's length (default DEFAULT_JOB_LIMITS) */
  limits?: JobLimits;
  /** where time comes from (default: the system clock) */
  clock?: Clock;
  /** the cluster whose subjects and buckets it uses (default: the default cluster) */
  cluster?: string;
  /** this replica's id (the coordinator passes its replicaId; default: random) */
  replica?: string;
  extraProviders?: Provider[];
}

/** Drains a connection the jobs module opened itself. */
@Injectable()
class OwnedNatsCloser implements OnApplicationShutdown {
  constructor(@Inject(JOBS_NATS) private readonly nc: NatsConnection) {}
  async onApplicationShutdown(): Promise<void> {
    // a drain that fails (the connection is already broken) closes it instead
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }
}

/** A connection of the jobs module's own (drained on shutdown). */
export function ownNatsConnection(url: string): Provider[] {
  return [
    { provide: JOBS_NATS, useFactory: () => connect({ ...natsLogin(), servers: url, name: 'cmesh-coordinator-jobs', timeout: 5000 }) },
    InboundMessages,
    OwnedNatsCloser,
  ];
}

/** The jobs module's units, each bound to this module's NATS connection, cluster and replica id. */
const JOB_UNITS: Provider[] = [
  {
    provide: JobStore,
    inject: [JOBS_NATS, JOB_CLUSTER, { token: JOB_RETENTION, optional: true }, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, retention?: JobRetention, inbound?: InboundMessages) => new JobStore(nc, names.buckets.jobs, retention, inbound?.records(names.buckets.jobs)),
  },
  {
    provide: AgentClaims,
    inject: [JOBS_NATS, JOB_CLUSTER, JOB_REPLICA, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, replica: string, inbound?: InboundMessages) => new AgentClaims(nc, names.buckets.claims, replica, inbound?.records(names.buckets.claims)),
  },
  {
    provide: ReplicaLeases,
    inject: [JOBS_NATS, JOB_CLUSTER, JOB_REPLICA, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, replica: string, inbound?: InboundMessages) => new ReplicaLeases(nc, names.buckets.replicas, replica, inbound?.records(names.buckets.replicas)),
  },
  JobBuckets,
  JobSecrets,
  ReplicaRecovery,
  ReplicaUpkeep,
  JobsService,
];

@Module({})
export class JobsModule {
  static forRoot(opts: JobsModuleOptions): DynamicModule {
    const nats = opts.nats ? [opts.nats] : ownNatsConnection(opts.natsUrl ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
    return {
      module: JobsModule,
      imports: opts.imports ?? [],
      controllers: [JobsController, JobsNats],
      providers: [
        ...nats,
        opts.directory,
        { provide: JOB_CLOCK, useValue: opts.clock ?? systemClock },
        { provide: JOB_CLUSTER, useValue: clusterNames(opts.cluster) },
        { provide: JOB_REPLICA, useValue: opts.replica ?? randomBytes(4).toString('hex') },
        ...(opts.retention ? [{ provide: JOB_RETENTION, useValue: opts.retention }] : []),
        ...(opts.limits ? [{ provide: JOB_LIMITS, useValue: opts.limits }] : []),
        ...JOB_UNITS,
        ...(opts.extraProviders ?? []),
      ],
      exports: [JobsService, AgentDirectory, JobSecrets],
    };
  }
}

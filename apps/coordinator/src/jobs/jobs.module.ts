// Jobs: REST (/jobs) and NATS (cmesh.jobs.*) submission, dispatch to the rank agents, results in
// KV. forRoot takes where agents and groups come from and the NATS connection to use.
import { DynamicModule, Inject, Injectable, Module, ModuleMetadata, OnApplicationShutdown, Provider } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { ClusterNames, clusterNames } from '@cmesh/protocol';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { InboundMessages } from '../nats/inbound-messages';
import { IdempotencyKeys } from '../idempotency/idempotency-keys';
import { AgentClaims, CLAIM_STALE_MS } from './agent-claims';
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
import { JOBS_NATS, JOB_CLAIM_STALE_MS, JOB_CLOCK, JOB_CLUSTER, JOB_LIMITS, JOB_REPLICA, JOB_RETENTION } from './tokens';
import type { JobLimits } from './job-limits';
import { NATS_RECONNECT, drainWithin, natsLogin, natsServers, watchConnection } from '@cmesh/collectives/nats';

export interface JobsModuleOptions {
  imports?: ModuleMetadata['imports'];
  /** binds AgentDirectory */
  directory: Provider;
  /** binds JOBS_NATS (the coordinator's connection); or, with `natsUrl`, a connection of its own */
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
  /** how long a claim or lease lasts without renewal (the coordinator's claimStaleMs; default CLAIM_STALE_MS) */
  claimStaleMs?: number;
  extraProviders?: Provider[];
}

/** Drains a connection the jobs module opened itself. */
@Injectable()
class OwnedNatsCloser implements OnApplicationShutdown {
  constructor(@Inject(JOBS_NATS) private readonly nc: NatsConnection) {}
  async onApplicationShutdown(): Promise<void> {
    // bounded: a stopping replica must stop even while its NATS is away
    await drainWithin(this.nc);
  }
}

/** A connection of the jobs module's own (drained on shutdown). */
function ownNatsConnection(url: string): Provider[] {
  return [
    {
      provide: JOBS_NATS,
      useFactory: async () => {
        const nc = await connect({ ...natsLogin(), ...NATS_RECONNECT, servers: natsServers(url), name: 'cmesh-coordinator-jobs', timeout: 5000 });
        watchConnection(nc);
        return nc;
      },
    },
    InboundMessages,
    OwnedNatsCloser,
  ];
}

/** The jobs module's units, each bound to this module's NATS connection, cluster and replica id. */
const JOB_UNITS: Provider[] = [
  {
    provide: JobStore,
    inject: [JOBS_NATS, JOB_CLUSTER, { token: JOB_RETENTION, optional: true }, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, retention?: JobRetention, inbound?: InboundMessages) =>
      new JobStore(nc, names.buckets.jobs, retention, inbound?.records(names.buckets.jobs)),
  },
  {
    provide: AgentClaims,
    inject: [JOBS_NATS, JOB_CLUSTER, JOB_REPLICA, JOB_CLAIM_STALE_MS, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, replica: string, staleMs: number, inbound?: InboundMessages) =>
      new AgentClaims(nc, names.buckets.claims, replica, inbound?.records(names.buckets.claims), staleMs),
  },
  {
    provide: ReplicaLeases,
    inject: [JOBS_NATS, JOB_CLUSTER, JOB_REPLICA, JOB_CLAIM_STALE_MS, { token: InboundMessages, optional: true }],
    useFactory: (nc: NatsConnection, names: ClusterNames, replica: string, staleMs: number, inbound?: InboundMessages) =>
      new ReplicaLeases(nc, names.buckets.replicas, replica, inbound?.records(names.buckets.replicas), staleMs),
  },
  {
    provide: IdempotencyKeys,
    inject: [JOBS_NATS, JOB_CLUSTER, JOB_REPLICA],
    // the nonce tells this start from an earlier one under the same id (a restarted container)
    useFactory: (nc: NatsConnection, names: ClusterNames, replica: string) =>
      new IdempotencyKeys(nc, names.buckets.idempotency, `${replica}/${randomBytes(4).toString('hex')}`),
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
    if (!opts.nats && !opts.natsUrl) throw new Error('JobsModule.forRoot: give `nats` (a JOBS_NATS provider) or `natsUrl`');
    const nats = opts.nats ? [opts.nats] : ownNatsConnection(opts.natsUrl!);
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
        { provide: JOB_CLAIM_STALE_MS, useValue: opts.claimStaleMs ?? CLAIM_STALE_MS },
        ...(opts.retention ? [{ provide: JOB_RETENTION, useValue: opts.retention }] : []),
        ...(opts.limits ? [{ provide: JOB_LIMITS, useValue: opts.limits }] : []),
        ...JOB_UNITS,
        ...(opts.extraProviders ?? []),
      ],
      exports: [JobsService, AgentDirectory, JobSecrets],
    };
  }
}

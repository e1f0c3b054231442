// Jobs: REST (/jobs) and NATS (cmesh.jobs.*) submission, dispatch to the rank agents, results in
// KV. forRoot takes where agents and groups come from and the NATS connection to use.
import { DynamicModule, Inject, Injectable, Module, ModuleMetadata, OnApplicationShutdown, Provider } from '@nestjs/common';
import { connect, NatsConnection } from 'nats';
import { InboundMessages } from '../nats/inbound-messages';
import { AgentDirectory } from './agent-directory';
import { JobsController } from './jobs.controller';
import { JobsService } from './jobs.service';
import { JobRetention } from './job-store';
import { JOBS_NATS, JOB_RETENTION } from './tokens';

export interface JobsModuleOptions {
  imports?: ModuleMetadata['imports'];
  /** binds AgentDirectory */
  directory: Provider;
  /** binds JOBS_NATS; default: a connection of its own to NATS_URL */
  nats?: Provider;
  natsUrl?: string;
  /** records kept and for how long (default DEFAULT_JOB_RETENTION) */
  retention?: JobRetention;
  extraProviders?: Provider[];
}

/** Drains a connection the jobs module opened itself. */
@Injectable()
class OwnedNatsCloser implements OnApplicationShutdown {
  constructor(@Inject(JOBS_NATS) private readonly nc: NatsConnection) {}
  async onApplicationShutdown(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }
}

/** A connection of the jobs module's own (drained on shutdown). */
export function ownNatsConnection(url: string): Provider[] {
  return [
    { provide: JOBS_NATS, useFactory: () => connect({ servers: url, name: 'cmesh-coordinator-jobs', timeout: 5000 }) },
    { provide: InboundMessages, inject: [JOBS_NATS], useFactory: (nc: NatsConnection) => new InboundMessages(nc) },
    OwnedNatsCloser,
  ];
}

@Module({})
export class JobsModule {
  static forRoot(opts: JobsModuleOptions): DynamicModule {
    const nats = opts.nats ? [opts.nats] : ownNatsConnection(opts.natsUrl ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
    return {
      module: JobsModule,
      imports: opts.imports ?? [],
      controllers: [JobsController],
      providers: [...nats, opts.directory, JobsService, ...(opts.retention ? [{ provide: JOB_RETENTION, useValue: opts.retention }] : []), ...(opts.extraProviders ?? [])],
      exports: [JobsService, AgentDirectory],
    };
  }
}

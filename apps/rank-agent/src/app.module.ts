// The rank agent: registration + heartbeats, the job subjects on NATS (NATS controllers, see
// nats/nats-transport.ts), the jobs' execution with a job runner per backend (tcp: the CPU data
// plane, a child process per job; nccl: the sidecar), /health and /metrics over HTTP.
import { DynamicModule, Logger, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { NcclSidecar } from '@cmesh/collectives/nccl';
import { clusterNames, printableLogHooks } from '@cmesh/protocol';
import { NcclJobRunner, SidecarLog } from './runners/nccl-job-runner';
import { TcpJobRunner } from './runners/tcp/tcp-job-runner';
import { agentMemoryLimit } from './runners/tcp/worker-memory';
import { AGENT_CONFIG, AgentConfig } from './config';
import { JobExecutionService } from './execution/job-execution.service';
import { JobSubjects } from './execution/job-subjects';
import { JOB_RUNNERS } from './execution/tokens';
import { HealthController } from './health/health.controller';
import { MetricsModule } from './metrics/metrics.module';
import { InboundMessages } from './nats/inbound-messages';
import { NatsService } from './nats/nats.service';
import { openJobStore } from './nats/job-store';
import { GroupEvents, GroupMembership } from './registration/group-membership';
import { RegistrationService } from './registration/registration.service';
import { ServiceGroupWorkers } from './service-groups/service-group-workers';

@Module({})
export class AppModule {
  static forRoot(config: AgentConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        MetricsModule.forRoot(config.cluster),
        // structured logs like the coordinator's: one JSON line per event, tagged with the agent
        LoggerModule.forRoot({
          pinoHttp: {
            level: process.env.LOG_LEVEL ?? 'info',
            autoLogging: false,
            quietReqLogger: true,
            base: { service: 'cmesh-agent', agent: config.name },
            hooks: printableLogHooks,
          },
        }),
      ],
      controllers: [HealthController, JobSubjects, GroupEvents],
      providers: [
        { provide: AGENT_CONFIG, useValue: config },
        NatsService,
        InboundMessages,
        {
          provide: JOB_RUNNERS,
          inject: [NatsService],
          useFactory: async (nats: NatsService) => {
            const tcp = new TcpJobRunner(
              config.natsUrl,
              config.host,
              {
                CMESH_DATA_PORTS: config.dataPorts.join('-'),
                // the job workers answer the coordinator's flight recorder requests (GET /groups/{job}/trace)
                CMESH_TRACE_NATS_URL: process.env.CMESH_TRACE_NATS_URL || config.natsUrl,
                ...(config.natsReplicas ? { CMESH_NATS_REPLICAS: String(config.natsReplicas) } : {}),
                CMESH_TRACE_SUBJECT: process.env.CMESH_TRACE_SUBJECT || clusterNames(config.cluster).trace.collect,
              },
              true,
              { agent: config.name, limit: agentMemoryLimit(config.jobMemoryBytes) },
            );
            // the agent registers once its first job worker has loaded: a job it takes then
            // does not wait for a cold start (seconds on a busy host) inside the job's timeout
            await tcp.warm();
            // the sidecar's output in this log, tagged with the job: NCCL's warnings (NCCL_DEBUG=WARN
            // unless set otherwise) are what a failed multi-GPU run is read from
            const sidecarLogger = new Logger('NcclSidecar');
            const sidecarLog = new SidecarLog((line, { stream, job }) => {
              const text = job ? `job ${job}: ${line}` : line;
              if (stream === 'stderr' || line.includes(' NCCL WARN ')) sidecarLogger.warn(text);
              else sidecarLogger.log(text);
            });
            const sidecarEnv = { ...process.env, NCCL_DEBUG: process.env.NCCL_DEBUG || 'WARN' };
            const nccl = new NcclJobRunner(
              config.ncclEnabled
                ? new NcclSidecar({
                    attachSocketPath: config.ncclSocket,
                    env: sidecarEnv,
                    onSidecarStdout: sidecarLog.stdout,
                    onSidecarStderr: sidecarLog.stderr,
                  })
                : null,
              config.deviceIndex,
              async (prefix) => openJobStore(await nats.connection(), prefix),
              { deviceNamed: config.deviceNamed, sidecarLog },
            );
            await nccl.start();
            return { tcp, nccl };
          },
        },
        JobExecutionService,
        RegistrationService,
        GroupMembership,
        ServiceGroupWorkers,
      ],
    };
  }
}

// The agent's service group members: one child process (member-worker.ts) per placement the
// coordinator sends (AgentNotification 'svc-member'), killed by pid when the agent stops. A worker
// ends itself when its group ends; the agent keeps no state of its own about the group. Each op a
// worker finishes comes back over IPC into the agent's metrics. A group placed on nccl runs through
// the agent's own sidecar (the worker attaches to its socket) on the agent's GPU. The group's
// secret and store prefix (only on this agent's own events subject) go to the worker over IPC,
// never through argv, the environment or a store; the messages a worker drops (a MAC that fails,
// a malformed body) are counted in the agent's cmesh_rejected_messages_total.
import { ChildProcess, fork } from 'child_process';
import { extname, join } from 'path';
import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { clusterNames } from '@cmesh/protocol';
import type { ServiceGroupAgentEvent } from '@cmesh/protocol';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { NcclJobRunner } from '../runners/nccl-job-runner';
import type { JobRunner } from '../execution/job-runner';
import { JOB_RUNNERS } from '../execution/tokens';
import { AgentMetrics } from '../metrics/agent-metrics';
import { InboundMessages } from '../nats/inbound-messages';
import type { FromMemberWorker } from './member-stats';
import type { ToMemberWorker } from './member-worker';
import { removeLocalSocket } from './local-server';

const WORKER = join(__dirname, `member-worker${extname(__filename)}`);

@Injectable()
export class ServiceGroupWorkers implements OnApplicationShutdown {
  private readonly log = new Logger('ServiceGroups');
  private readonly children = new Map<string, ChildProcess>();

  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    private readonly metrics: AgentMetrics,
    @Inject(JOB_RUNNERS) private readonly backends: Record<string, JobRunner>,
    private readonly inbound: InboundMessages,
  ) {}

  /** What a worker of an nccl group needs: this agent's GPU and its sidecar's socket, or why there is none. */
  private nccl(): ToMemberWorker['nccl'] {
    const b = this.backends.nccl;
    const socket = b instanceof NcclJobRunner ? b.sidecarSocket() : null;
    return socket ? { device: this.config.deviceIndex, socket } : { device: this.config.deviceIndex, reason: b?.available().reason ?? 'no nccl backend' };
  }

  start(ev: ServiceGroupAgentEvent): void {
    const { placed, rank, secret, storePrefix } = ev;
    const key = `${placed.groupId}/${rank}`;
    if (this.children.has(key)) return;
    const child = fork(WORKER, [], {
      execArgv: WORKER.endsWith('.ts') ? ['-r', '@swc-node/register'] : [],
      env: {
        ...process.env,
        CMESH_DATA_PORTS: this.config.dataPorts.join('-'),
        // the data plane listens on this agent's address
        MASTER_ADDR: this.config.host,
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.children.set(key, child);
    child.on('error', () => undefined);
    child.on('message', (m: FromMemberWorker) => {
      if (m?.type === 'service-group-ops') for (const op of m.ops) this.metrics.onServiceOp(op);
      else if (m?.type === 'service-group-dropped') this.inbound.rejected.inc({ subject: m.subject, reason: m.reason }, m.count);
    });
    child.once('exit', (code, sig) => {
      this.children.delete(key);
      // a worker killed by a signal leaves its local socket's file
      if (child.pid) removeLocalSocket(child.pid);
      this.log.log(`service group ${placed.groupId} rank ${rank}: worker ${child.pid} exited (${sig ?? `code ${code}`})`);
    });
    const msg: ToMemberWorker = {
      type: 'start',
      placed,
      rank,
      secret,
      storePrefix,
      natsUrl: this.config.natsUrl,
      cluster: clusterNames(this.config.cluster).cluster,
      nccl: this.nccl(),
    };
    child.send(msg);
    this.log.log(
      `service group ${placed.groupId}: rank ${rank} (member ${placed.members[rank]?.label ?? placed.members[rank]?.member}) on worker ${child.pid}, backend ${placed.backend ?? 'tcp'}`,
    );
  }

  /** The members served now (`<groupId>/<rank>`), for /health. */
  list(): string[] {
    return [...this.children.keys()];
  }

  /** The groups served now, for heartbeats. */
  groups(): string[] {
    return [...new Set([...this.children.keys()].map((k) => k.slice(0, k.lastIndexOf('/'))))];
  }

  async onApplicationShutdown(): Promise<void> {
    const running = [...this.children.values()];
    const exited = Promise.all(running.map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r)))));
    for (const c of running) {
      try {
        if (c.pid) process.kill(c.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 3000).unref())]);
  }
}

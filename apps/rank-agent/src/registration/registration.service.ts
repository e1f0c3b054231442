// Registration with the coordinator (the cluster's agents.register), heartbeats at the interval the
// coordinator asks for (carrying busy/idle, and the backends when they change), re-registration
// when the coordinator forgot us (restart, failover), and deregistration on shutdown. The agent
// keeps trying while the coordinator is not up yet.
import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { AgentRegister, ClusterNames, clusterNames, ErrorReplySchema, PROTOCOL_VERSION } from '@cmesh/protocol';
import { hostIdentity } from '@cmesh/collectives/host-identity';
import { z } from 'zod';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { JobExecutionService } from '../execution/job-execution.service';
import { JobRunner } from '../execution/job-runner';
import { ServiceGroupWorkers } from '../service-groups/service-group-workers';
import { JOB_RUNNERS } from '../execution/tokens';
import { NatsService } from '../nats/nats.service';

/** The coordinator's answer to register and heartbeat: the interval it asks for, or its refusal. */
const Reply = z.union([z.object({ ok: z.literal(true), heartbeatMs: z.number().int().min(10).max(600_000).optional() }), ErrorReplySchema]);

/** How long a heartbeat waits for its answer at most (never longer than the interval). */
const HEARTBEAT_ANSWER_MS = 3000;

@Injectable()
export class RegistrationService implements BeforeApplicationShutdown {
  private readonly log = new Logger('Registration');
  private timer: NodeJS.Timeout | null = null;
  private registered = false;
  private stopped = false;
  private heartbeatMs: number;
  private httpUrl: string | undefined;
  /** the backends as the coordinator last heard them (JSON) */
  private saidBackends = '';
  /** the cluster's agent subjects */
  private readonly subjects: ClusterNames['agents'];

  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    @Inject(JOB_RUNNERS) private readonly runners: Record<string, JobRunner>,
    private readonly jobs: JobExecutionService,
    private readonly nats: NatsService,
    private readonly service: ServiceGroupWorkers,
  ) {
    this.heartbeatMs = config.heartbeatMs;
    this.subjects = clusterNames(config.cluster).agents;
  }

  /** The registration body: who, where, which backends (with the reason when unavailable). */
  describe(): AgentRegister {
    const nccl = this.runners.nccl?.available() ?? { ok: false, reason: 'not configured' };
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentId: this.config.agentId,
      name: this.config.name,
      host: this.config.host,
      hostId: hostIdentity(),
      node: this.config.nodeName,
      pid: process.pid,
      device: { kind: nccl.ok ? 'gpu' : 'cpu', index: this.config.deviceIndex },
      backends: this.backendInfo(),
      dataPlane: { host: this.config.host, ...(this.config.dataPorts[1] > 0 ? { portRange: this.config.dataPorts } : {}) },
      ...(this.httpUrl ? { httpUrl: this.httpUrl } : {}),
    };
  }

  private backendInfo(): AgentRegister['backends'] {
    return Object.entries(this.runners).map(([name, r]) => {
      const a = r.available();
      return { name: name as 'tcp' | 'nccl', available: a.ok, ...(a.ok ? {} : { reason: a.reason ?? 'unavailable' }) };
    });
  }

  /** Starts registering (retrying) and heartbeating; httpUrl is where /metrics and /health are. */
  async start(httpUrl: string): Promise<void> {
    this.httpUrl = httpUrl;
    await this.nats.connection();
    await this.beat();
  }

  isRegistered(): boolean {
    return this.registered;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.beat(), ms);
  }

  private async beat(): Promise<void> {
    // heartbeats keep their cadence whether or not an answer comes: every replica hears the
    // heartbeat itself, and the leader judges the agent by the gaps between heartbeats, so an
    // answer lost with a replica that died (or hangs) must not hold the next one back past the
    // coordinator's loss window (missed heartbeats x interval)
    const started = Date.now();
    const next = () => this.schedule(Math.max(0, this.heartbeatMs - (Date.now() - started)));
    try {
      for (const r of Object.values(this.runners)) r.refresh?.();
      if (!this.registered) {
        const body = this.describe();
        const r = await this.nats.request(this.subjects.register(this.config.agentId), body, Reply, 3000);
        if (!r.ok) throw new Error(`${r.error.code}: ${r.error.message}`);
        this.registered = true;
        this.saidBackends = JSON.stringify(body.backends);
        if (r.heartbeatMs) this.heartbeatMs = r.heartbeatMs;
        this.log.log(`registered as ${this.config.agentId} (heartbeat every ${this.heartbeatMs} ms)`);
      } else {
        // backends only when they changed (a sidecar lost or back): placement reads them
        const backends = this.backendInfo();
        const said = JSON.stringify(backends);
        const changed = said !== this.saidBackends;
        const body = {
          agentId: this.config.agentId,
          busy: this.jobs.state().state === 'busy',
          serving: this.service.groups(),
          ...(changed ? { backends } : {}),
        };
        const r = await this.nats.request(this.subjects.heartbeat(this.config.agentId), body, Reply, Math.min(HEARTBEAT_ANSWER_MS, this.heartbeatMs));
        if (r.ok && changed) {
          this.saidBackends = said;
          this.log.log(`backends now: ${backends.map((b) => `${b.name} ${b.available ? 'available' : `unavailable (${b.reason})`}`).join(', ')}`);
        }
        if (!r.ok && r.error.code === 'NOT_FOUND') {
          this.registered = false;
          this.log.warn('the coordinator does not know this agent any more: registering again');
          return this.schedule(0);
        }
        if (!r.ok) throw new Error(`${r.error.code}: ${r.error.message}`);
      }
      next();
    } catch (e) {
      if (this.stopped) return;
      this.log.warn(`${this.registered ? 'heartbeat' : 'registration'} failed (${(e as Error).message}); retrying`);
      if (this.registered) next();
      else this.schedule(Math.min(this.heartbeatMs, 1000));
    }
  }

  /** Before the NATS connection drains (onApplicationShutdown), so the deregistration gets out. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.registered) {
      await this.nats.request(this.subjects.deregister(this.config.agentId), { agentId: this.config.agentId }, z.unknown(), 1000).catch(() => undefined);
      this.registered = false;
    }
  }
}

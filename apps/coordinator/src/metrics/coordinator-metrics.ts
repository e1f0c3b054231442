// The coordinator's Prometheus metrics: agents by state, groups, heartbeat gaps,
// rendezvous durations, and every job row (duration, busbw/algbw of the last sweep, #wrong,
// errors), plus the default process metrics.
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AGENT_STATES, BenchRow, PROTOCOL_VERSION, DURATION_BUCKETS, JobRecord, LastSweepSeries, opLabel, sizeBucket, sizeClass } from '@cmesh/protocol';
import { METRICS } from './metric-names';
import type { ClusterNames } from '@cmesh/protocol';
import { AgentsService } from '../agents/agents.service';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { GroupsService } from '../groups/groups.service';
import { InboundMessages } from '../nats/inbound-messages';
import type { JobResultSink } from '../jobs/tokens';
import { RendezvousService } from '../rendezvous/rendezvous.service';

@Injectable()
export class CoordinatorMetrics implements OnModuleInit, JobResultSink {
  readonly registry = new Registry();
  private readonly duration: Histogram;
  private readonly busbw: Gauge;
  private readonly algbw: Gauge;
  private readonly errors: Counter;
  private readonly wrong: Counter;
  private readonly jobs: Counter;
  private readonly rendezvous: Histogram;
  private readonly lastSweep = new LastSweepSeries();

  constructor(
    private readonly agents: AgentsService,
    private readonly groups: GroupsService,
    private readonly rdzv: RendezvousService,
    inbound: InboundMessages,
    @Inject(CLUSTER_NAMES) names: ClusterNames,
  ) {
    const r = [this.registry];
    // every series names its cluster (CMESH_CLUSTER): one Prometheus scrapes several meshes apart
    this.registry.setDefaultLabels({ cluster: names.cluster });
    new Gauge({ name: METRICS.componentInfo.name, help: METRICS.componentInfo.help, labelNames: METRICS.componentInfo.labels, registers: r }).set(
      { component: 'coordinator', protocol_version: String(PROTOCOL_VERSION) },
      1,
    );
    collectDefaultMetrics({ register: this.registry });
    this.registry.registerMetric(inbound.rejected);
    const m = METRICS;
    this.duration = new Histogram({
      name: m.collectiveDuration.name,
      help: m.collectiveDuration.help,
      labelNames: m.collectiveDuration.labels,
      buckets: DURATION_BUCKETS,
      registers: r,
    });
    this.busbw = new Gauge({ name: m.collectiveBusbw.name, help: m.collectiveBusbw.help, labelNames: m.collectiveBusbw.labels, registers: r });
    this.algbw = new Gauge({ name: m.collectiveAlgbw.name, help: m.collectiveAlgbw.help, labelNames: m.collectiveAlgbw.labels, registers: r });
    this.errors = new Counter({ name: m.collectiveErrors.name, help: m.collectiveErrors.help, labelNames: m.collectiveErrors.labels, registers: r });
    this.wrong = new Counter({ name: m.collectiveWrong.name, help: m.collectiveWrong.help, labelNames: m.collectiveWrong.labels, registers: r });
    this.jobs = new Counter({ name: m.jobs.name, help: m.jobs.help, labelNames: m.jobs.labels, registers: r });
    this.rendezvous = new Histogram({ name: m.rendezvousDuration.name, help: m.rendezvousDuration.help, buckets: DURATION_BUCKETS, registers: r });
    const agentsService = this.agents;
    const groupsService = this.groups;
    new Gauge({
      name: m.agents.name,
      help: m.agents.help,
      labelNames: m.agents.labels,
      registers: r,
      async collect() {
        const counts = new Map<string, number>(AGENT_STATES.map((s) => [s, 0]));
        for (const a of await agentsService.heard().catch(() => [])) counts.set(a.state, (counts.get(a.state) ?? 0) + 1);
        for (const [state, n] of counts) this.set({ state }, n);
      },
    });
    new Gauge({
      name: m.groups.name,
      help: m.groups.help,
      registers: r,
      async collect() {
        this.set((await groupsService.list().catch(() => [])).length);
      },
    });
    new Gauge({
      name: m.heartbeatGap.name,
      help: m.heartbeatGap.help,
      labelNames: m.heartbeatGap.labels,
      registers: r,
      async collect() {
        this.reset();
        const now = Date.now();
        for (const a of await agentsService.heard().catch(() => [])) this.set({ agent: a.agentId }, (now - a.lastHeardMs) / 1000);
      },
    });
  }

  onModuleInit(): void {
    this.rdzv.onRoundClosed((s) => this.rendezvous.observe(s));
  }

  onRow(job: JobRecord, row: BenchRow): void {
    const m = row.outOfPlace ?? row.inPlace;
    if (!m) return;
    const algorithm = job.sweep.algorithm ?? 'auto';
    const dtype = row.type;
    const op = opLabel(row.op);
    this.duration.observe({ op, backend: row.backend, algorithm, dtype, size_bucket: sizeBucket(row.bytes) }, m.timeUs / 1e6);
    const labels = { op, backend: row.backend, dtype, size_class: sizeClass(row.bytes) };
    for (const old of this.lastSweep.record(job.id, labels)) {
      this.busbw.remove(old);
      this.algbw.remove(old);
    }
    this.busbw.set(labels, m.busBwGBs * 1e9);
    this.algbw.set(labels, m.algBwGBs * 1e9);
    const wrong = (row.outOfPlace?.wrong ?? 0) + (row.inPlace?.wrong ?? 0);
    this.wrong.inc({ op }, wrong);
  }

  onFinished(job: JobRecord): void {
    this.jobs.inc({ state: job.state });
    if (job.state === 'failed') this.errors.inc({ op: opLabel(job.sweep.op), reason: job.failedAgent ? 'agent_lost' : 'job_failed' });
  }
}

// The agent's Prometheus metrics, fed by the job runner (JOB_OBSERVER): every timed
// iteration into the duration histogram, tensor and wire bytes, this rank's own algbw/busbw of the last
// sweep per op and size (its median time; the coordinator's series use the slowest rank), #wrong
// and errors; each op its service group members ran (onServiceOp, reported by the member workers);
// plus the default process metrics.
import { Inject, Injectable, Optional } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { bandwidths, busBwFactor, median } from '@cmesh/bench';
import {
  DEFAULT_CLUSTER,
  DURATION_BUCKETS,
  PROTOCOL_VERSION,
  JobAssignment,
  LastSweepSeries,
  METRICS,
  SizeSamplesMsg,
  opLabel,
  sizeBucket,
  sizeClass,
} from '@cmesh/protocol';
import type { JobObserver } from '../execution/tokens';
import type { ServiceGroupOpReport } from '../service-groups/member-stats';

/** Service group names an agent labels its metrics with; ops of any later name count under SERVICE_GROUP_OTHER. */
const SERVICE_GROUP_METRICS_MAX_GROUPS = 32;
/** Not a group name (names have no `_`), so it cannot be mistaken for one. */
const SERVICE_GROUP_OTHER = '_other';
/** The agent's cluster (CMESH_CLUSTER), the `cluster` label of every series it exports. */
export const METRICS_CLUSTER = Symbol('METRICS_CLUSTER');

@Injectable()
export class AgentMetrics implements JobObserver {
  readonly registry = new Registry();
  private readonly duration: Histogram;
  private readonly payload: Counter;
  private readonly bytes: Counter;
  private readonly busbw: Gauge;
  private readonly algbw: Gauge;
  private readonly wrong: Counter;
  private readonly errors: Counter;
  private readonly lastSweep = new LastSweepSeries();
  private readonly serviceGroupDuration: Histogram;
  private readonly serviceGroupBytes: Counter;
  private readonly serviceGroupBusBytes: Counter;
  private readonly serviceGroupErrors: Counter;
  private readonly serviceGroups = new Set<string>();

  constructor(@Optional() @Inject(METRICS_CLUSTER) cluster: string = DEFAULT_CLUSTER) {
    const registers = [this.registry];
    // every series names its cluster: one Prometheus scrapes several meshes apart
    this.registry.setDefaultLabels({ cluster });
    const m = METRICS;
    new Gauge({ name: m.componentInfo.name, help: m.componentInfo.help, labelNames: m.componentInfo.labels, registers }).set(
      { component: 'agent', protocol_version: String(PROTOCOL_VERSION) },
      1,
    );
    collectDefaultMetrics({ register: this.registry });
    this.duration = new Histogram({
      name: m.collectiveDuration.name,
      help: m.collectiveDuration.help,
      labelNames: m.collectiveDuration.labels,
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.bytes = new Counter({ name: m.collectiveBytes.name, help: m.collectiveBytes.help, labelNames: m.collectiveBytes.labels, registers });
    this.payload = new Counter({
      name: m.collectivePayloadBytes.name,
      help: m.collectivePayloadBytes.help,
      labelNames: m.collectivePayloadBytes.labels,
      registers,
    });
    this.busbw = new Gauge({ name: m.collectiveBusbw.name, help: m.collectiveBusbw.help, labelNames: m.collectiveBusbw.labels, registers });
    this.algbw = new Gauge({ name: m.collectiveAlgbw.name, help: m.collectiveAlgbw.help, labelNames: m.collectiveAlgbw.labels, registers });
    this.wrong = new Counter({ name: m.collectiveWrong.name, help: m.collectiveWrong.help, labelNames: m.collectiveWrong.labels, registers });
    this.errors = new Counter({ name: m.collectiveErrors.name, help: m.collectiveErrors.help, labelNames: m.collectiveErrors.labels, registers });
    this.serviceGroupDuration = new Histogram({
      name: m.serviceOpDuration.name,
      help: m.serviceOpDuration.help,
      labelNames: m.serviceOpDuration.labels,
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.serviceGroupBytes = new Counter({ name: m.serviceOpBytes.name, help: m.serviceOpBytes.help, labelNames: m.serviceOpBytes.labels, registers });
    this.serviceGroupBusBytes = new Counter({
      name: m.serviceOpBusBytes.name,
      help: m.serviceOpBusBytes.help,
      labelNames: m.serviceOpBusBytes.labels,
      registers,
    });
    this.serviceGroupErrors = new Counter({ name: m.serviceOpErrors.name, help: m.serviceOpErrors.help, labelNames: m.serviceOpErrors.labels, registers });
  }

  onSize(a: JobAssignment, _rank: number, s: SizeSamplesMsg): void {
    const { sweep } = a;
    const op = opLabel(sweep.op);
    const dtype = sweep.dtype;
    const hist = { op, backend: sweep.backend, algorithm: sweep.algorithm ?? 'auto', dtype, size_bucket: sizeBucket(s.bytes) };
    const times: number[] = [];
    let wrong = 0;
    for (const v of s.variants) {
      for (const t of v.times) this.duration.observe(hist, t);
      times.push(...v.times);
      wrong += v.wrong ?? 0;
    }
    if (s.wire) {
      this.bytes.inc({ op, backend: sweep.backend, direction: 'sent' }, s.wire.sent);
      this.bytes.inc({ op, backend: sweep.backend, direction: 'received' }, s.wire.received);
    }
    if (times.length === 0) return;
    this.payload.inc({ op, backend: sweep.backend }, s.bytes * times.length);
    this.wrong.inc({ op }, wrong);
    const bw = bandwidths(sweep.op, s.bytes, median(times) * 1e6, a.members.length);
    const labels = { op, backend: sweep.backend, dtype, size_class: sizeClass(s.bytes) };
    for (const old of this.lastSweep.record(a.jobId, labels)) {
      this.busbw.remove(old);
      this.algbw.remove(old);
    }
    this.busbw.set(labels, bw.busBwGBs * 1e9);
    this.algbw.set(labels, bw.algBwGBs * 1e9);
  }

  onError(a: JobAssignment, reason: string): void {
    this.errors.inc({ op: opLabel(a.sweep.op), reason });
  }

  /** One op of a service group member on this agent: its time, bytes and bus bytes, or its failure. */
  onServiceOp(r: ServiceGroupOpReport): void {
    const group = this.serviceGroupLabel(r.name);
    const op = opLabel(r.op);
    if (r.error) {
      this.serviceGroupErrors.inc({ group, op, reason: r.error });
      return;
    }
    const labels = { group, op, dtype: r.dtype };
    this.serviceGroupDuration.observe(labels, r.seconds);
    this.serviceGroupBytes.inc(labels, r.bytes);
    // barrier moves no data: no bus bytes (and no factor for it)
    if (r.op !== 'barrier') this.serviceGroupBusBytes.inc(labels, r.bytes * busBwFactor(r.op, r.size));
  }

  /** The group's name while fewer than SERVICE_GROUP_METRICS_MAX_GROUPS names are labelled, else SERVICE_GROUP_OTHER. */
  private serviceGroupLabel(name: string): string {
    if (this.serviceGroups.has(name)) return name;
    if (this.serviceGroups.size >= SERVICE_GROUP_METRICS_MAX_GROUPS) return SERVICE_GROUP_OTHER;
    this.serviceGroups.add(name);
    return name;
  }
}

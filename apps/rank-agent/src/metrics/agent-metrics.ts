// The agent's Prometheus metrics, fed by the job runner (JOB_OBSERVER): every timed
// iteration into the duration histogram, tensor and wire bytes, this rank's own algbw/busbw of the last
// sweep per op and size (its median time; the coordinator's series use the slowest rank), #wrong
// and errors; plus the default process metrics.
import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { bandwidths, median } from '@cmesh/bench';
import { DURATION_BUCKETS, JobAssignment, LastSweepSeries, METRICS, SizeSamplesMsg, opLabel, sizeBucket } from '@cmesh/protocol';
import type { JobObserver } from '../execution/tokens';

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

  constructor() {
    const registers = [this.registry];
    const m = METRICS;
    collectDefaultMetrics({ register: this.registry });
    this.duration = new Histogram({ name: m.collectiveDuration.name, help: m.collectiveDuration.help, labelNames: m.collectiveDuration.labels, buckets: DURATION_BUCKETS, registers });
    this.bytes = new Counter({ name: m.collectiveBytes.name, help: m.collectiveBytes.help, labelNames: m.collectiveBytes.labels, registers });
    this.payload = new Counter({ name: m.collectivePayloadBytes.name, help: m.collectivePayloadBytes.help, labelNames: m.collectivePayloadBytes.labels, registers });
    this.busbw = new Gauge({ name: m.collectiveBusbw.name, help: m.collectiveBusbw.help, labelNames: m.collectiveBusbw.labels, registers });
    this.algbw = new Gauge({ name: m.collectiveAlgbw.name, help: m.collectiveAlgbw.help, labelNames: m.collectiveAlgbw.labels, registers });
    this.wrong = new Counter({ name: m.collectiveWrong.name, help: m.collectiveWrong.help, labelNames: m.collectiveWrong.labels, registers });
    this.errors = new Counter({ name: m.collectiveErrors.name, help: m.collectiveErrors.help, labelNames: m.collectiveErrors.labels, registers });
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
    const labels = { op, backend: sweep.backend, dtype, size_bytes: String(s.bytes) };
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
}

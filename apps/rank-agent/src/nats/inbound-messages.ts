// The agent's one decoder for inbound NATS messages (see @cmesh/protocol's Inbound): a payload
// that is not JSON, is too large or does not match its schema is counted in
// cmesh_rejected_messages_total, logged at most once per interval, and dropped; an error escaping
// a handler is logged with the subject. Nothing a publisher sends can stop the agent.
// InboundTransport subscribes the agent's NATS controllers through it (nats-transport.ts).
import { Injectable, Logger, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Inbound } from '@cmesh/protocol/kit';
import { METRICS } from '@cmesh/protocol';
import { AgentMetrics } from '../metrics/agent-metrics';

@Injectable()
export class InboundMessages {
  /** served on /metrics with the agent's other series */
  readonly rejected = new Counter({
    name: METRICS.rejectedMessages.name,
    help: METRICS.rejectedMessages.help,
    labelNames: METRICS.rejectedMessages.labels,
    registers: [],
  });
  private readonly log = new Logger('Inbound');
  readonly inbound = new Inbound({ count: (subject, reason) => this.rejected.inc({ subject, reason }), warn: (line) => this.log.warn(line) });

  constructor(@Optional() metrics?: AgentMetrics) {
    metrics?.registry.registerMetric(this.rejected);
  }
}

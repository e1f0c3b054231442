// Every subject the agent listens on is subscribed here, on the agent's own NATS connection, so
// every inbound message is decoded and validated one way (see @cmesh/protocol's Inbound): a
// payload that is not JSON, is too large or does not match its schema is counted in
// cmesh_rejected_messages_total, logged at most once per interval, and dropped; an error escaping
// a handler is logged with the subject. Nothing a publisher sends can stop the agent.
import { Injectable, Logger, Optional } from '@nestjs/common';
import type { Subscription } from 'nats';
import { Counter } from 'prom-client';
import { z } from 'zod';
import { Inbound, METRICS } from '@cmesh/protocol';
import { AgentMetrics } from '../metrics/agent-metrics';
import { NatsService } from './nats.service';

@Injectable()
export class InboundMessages {
  /** served on /metrics with the agent's other series */
  readonly rejected = new Counter({ name: METRICS.rejectedMessages.name, help: METRICS.rejectedMessages.help, labelNames: METRICS.rejectedMessages.labels, registers: [] });
  private readonly log = new Logger('Inbound');
  private readonly inbound = new Inbound({ count: (subject, reason) => this.rejected.inc({ subject, reason }), warn: (line) => this.log.warn(line) });

  constructor(
    private readonly nats: NatsService,
    @Optional() metrics?: AgentMetrics,
  ) {
    metrics?.registry.registerMetric(this.rejected);
  }

  /** A fire-and-forget subject (every agent gets every message). */
  async listen<S extends z.ZodTypeAny>(subject: string, schema: S, handler: (body: z.infer<S>) => unknown): Promise<Subscription> {
    const nc = await this.nats.connection();
    return nc.subscribe(subject, { callback: this.inbound.event(subject, schema, handler) });
  }
}

// Every subject the coordinator listens on is subscribed here, so every inbound message is
// decoded and validated one way (see @cmesh/protocol's Inbound): a malformed or oversized body
// is counted in cmesh_rejected_messages_total, logged at most once per interval, answered with a
// BAD_REQUEST error reply where a reply is expected, and changes nothing.
import { Logger } from '@nestjs/common';
import { NatsConnection, Subscription } from 'nats';
import { Counter } from 'prom-client';
import { z } from 'zod';
import { Inbound, METRICS, errorReply } from '@cmesh/protocol';
import { ReplyError } from './reply-error';

/** Request/reply subjects are served by one replica of the group. */
const QUEUE = 'cmesh-coordinator';

/** Provided by NatsModule on the coordinator's connection (and by a JobsModule with a connection of its own). */
export class InboundMessages {
  /** registered by CoordinatorMetrics into the /metrics registry */
  readonly rejected = new Counter({ name: METRICS.rejectedMessages.name, help: METRICS.rejectedMessages.help, labelNames: METRICS.rejectedMessages.labels, registers: [] });
  private readonly log = new Logger('Inbound');
  private readonly inbound = new Inbound({
    count: (subject, reason) => this.rejected.inc({ subject, reason }),
    warn: (line) => this.log.warn(line),
    refusal: (e) => (e instanceof ReplyError ? errorReply(e.code, e.message, e.issues) : undefined),
  });

  constructor(private readonly nc: NatsConnection) {}

  /** A request/reply operation: the body validated with `schema`; ReplyError becomes its error reply. */
  respond<S extends z.ZodTypeAny>(subject: string, schema: S, handler: (body: z.infer<S>) => Promise<unknown>): Subscription {
    return this.nc.subscribe(subject, { queue: QUEUE, callback: this.inbound.request(subject, schema, handler) });
  }

  /** Events every replica sees. */
  listen<S extends z.ZodTypeAny>(subject: string, schema: S, handler: (body: z.infer<S>) => unknown): Subscription {
    return this.nc.subscribe(subject, { callback: this.inbound.event(subject, schema, handler) });
  }
}

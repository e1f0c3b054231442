// The coordinator's one decoder for inbound NATS messages (see @cmesh/protocol's Inbound): a
// malformed or oversized body is counted in cmesh_rejected_messages_total, logged at most once
// per interval, answered with a BAD_REQUEST error reply where a reply is expected, and changes
// nothing. InboundTransport subscribes every NATS controller's pattern through it.
import { Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Inbound, METRICS, errorReply } from '@cmesh/protocol';
import { ReplyError } from './reply-error';

/** Provided by NatsModule (and by a JobsModule with a connection of its own). */
export class InboundMessages {
  /** registered by CoordinatorMetrics into the /metrics registry */
  readonly rejected = new Counter({ name: METRICS.rejectedMessages.name, help: METRICS.rejectedMessages.help, labelNames: METRICS.rejectedMessages.labels, registers: [] });
  private readonly log = new Logger('Inbound');
  readonly inbound = new Inbound({
    count: (subject, reason) => this.rejected.inc({ subject, reason }),
    warn: (line) => this.log.warn(line),
    refusal: (e) => (e instanceof ReplyError ? errorReply(e.code, e.message, e.issues) : undefined),
  });
}

// The coordinator's one decoder for inbound NATS messages (see @cmesh/protocol's Inbound): a
// malformed or oversized body is counted in cmesh_rejected_messages_total, logged at most once
// per interval, answered with a BAD_REQUEST error reply where a reply is expected, and changes
// nothing. InboundTransport subscribes every NATS controller's pattern through it. Replies
// gathered from many answerers (gather-replies.ts) and records read back from KV (kv-records.ts)
// are counted and logged here too.
import { Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Inbound, RateLimitedLog } from '@cmesh/protocol/kit';
import { METRICS, errorReply } from '@cmesh/protocol';
import { ReplyError } from './reply-error';
import { natsUnavailable } from './nats-unavailable';
import { RecordCheck, RecordSink } from '../state/kv-records';

/** Reasons beyond the decoder's: a gathered answer whose MAC did not check */
export type DropReason = Parameters<RecordSink['count']>[1] | 'bad_mac';

/** Provided by NatsModule (and by a JobsModule with a connection of its own). */
export class InboundMessages {
  /** registered by CoordinatorMetrics into the /metrics registry */
  readonly rejected = new Counter({
    name: METRICS.rejectedMessages.name,
    help: METRICS.rejectedMessages.help,
    labelNames: METRICS.rejectedMessages.labels,
    registers: [],
  });
  private readonly log = new Logger('Inbound');
  private readonly dropLog = new RateLimitedLog((line) => this.log.warn(line), 10_000);
  readonly inbound = new Inbound({
    count: (subject, reason) => this.rejected.inc({ subject, reason }),
    warn: (line) => this.log.warn(line),
    refusal: (e) => {
      const r = e instanceof ReplyError ? e : natsUnavailable(e);
      return r ? errorReply(r.code, r.message, r.issues) : undefined;
    },
  });
  private readonly sink: RecordSink = { count: (subject, reason) => this.rejected.inc({ subject, reason }), warn: (line) => this.log.warn(line) };

  /** A reply gathered on `subject` (one request, many answers) was dropped: counted, logged at most once per interval. */
  dropped(subject: string, reason: DropReason, detail: string): void {
    this.rejected.inc({ subject, reason });
    this.dropLog.report(`${subject}:${reason}`, `${subject}: dropped a reply (${reason}): ${detail.slice(0, 500)}`);
  }

  /** The check of records read back from `bucket`, counted here. */
  records(bucket: string): RecordCheck {
    return new RecordCheck(bucket, this.sink);
  }
}

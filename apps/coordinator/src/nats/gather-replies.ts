// One request to everyone listening on a subject, and their answers as they come: the trace
// collection and the service groups' status ask this way. Each reply that is JSON and fits
// `schema` is yielded (anyone may answer: the rest are dropped, and counted when a `rejected`
// sink is given) until `waitMs` is over, nobody listens (NATS answers 503 at once), too many
// replies or bytes came, or the caller stops: `break`, or `close()` from a timer. Decoding goes
// through the guarded decoder: no reply, however made, throws out of the iteration.
import { MsgHdrs, NatsConnection, Subscription, createInbox } from '@nats-io/nats-core';
import { connectionInboxPrefix } from '@cmesh/collectives/nats';
import { z } from 'zod';
import { RejectReason, decodeMessage } from '@cmesh/protocol';

/** Replies gathered at most, and their bytes (a flood of answers must not fill the memory). */
const GATHER_MAX_REPLIES = 65_536;
const GATHER_MAX_BYTES = 16 * 1024 * 1024;

export interface GatheredReply<T> {
  value: T;
  /** the reply's payload as received (what a MAC covers) */
  data: Uint8Array;
  headers?: MsgHdrs;
}

export interface GatherOptions {
  /** told about each reply dropped (not JSON, invalid, over the limits, not sent to the inbox) */
  rejected?(reason: RejectReason, detail: string): void;
  maxReplies?: number;
  maxBytes?: number;
}

export class GatherReplies<T> implements AsyncIterable<T> {
  private readonly sub: Subscription;
  private readonly deadline: NodeJS.Timeout;
  private readonly inbox: string;

  constructor(
    nc: NatsConnection,
    subject: string,
    body: unknown,
    private readonly schema: z.ZodType<T>,
    waitMs: number,
    private readonly opts: GatherOptions = {},
  ) {
    // under the login's own prefix (natsLogin): the only inboxes its permissions let it read
    this.inbox = createInbox(connectionInboxPrefix(nc));
    this.sub = nc.subscribe(this.inbox);
    this.deadline = setTimeout(() => this.close(), waitMs);
    nc.publish(subject, JSON.stringify(body), { reply: this.inbox });
  }

  /** Ends the iteration (after the replies already yielded). */
  close(): void {
    clearTimeout(this.deadline);
    this.sub.unsubscribe();
  }

  /** Every valid reply with its payload and headers. */
  async *replies(): AsyncGenerator<GatheredReply<T>> {
    const maxReplies = this.opts.maxReplies ?? GATHER_MAX_REPLIES;
    const maxBytes = this.opts.maxBytes ?? GATHER_MAX_BYTES;
    let n = 0;
    let bytes = 0;
    try {
      for await (const m of this.sub) {
        if (m.subject !== this.inbox) {
          // a JetStream consumer's delivery, not an answer sent to this inbox
          this.opts.rejected?.('not_published', 'delivered by a JetStream consumer, not sent to the inbox');
          continue;
        }
        if (m.headers?.code === 503) return;
        bytes += m.data.length;
        if (++n > maxReplies || bytes > maxBytes) {
          this.opts.rejected?.('too_large', `more than ${maxReplies} replies or ${maxBytes} bytes: the rest are not read`);
          return;
        }
        const d = decodeMessage(this.schema, m.data);
        if (!d.ok) {
          this.opts.rejected?.(d.reason, `${d.message}${d.issues?.length ? `: ${d.issues.slice(0, 3).join('; ')}` : ''}`);
          continue;
        }
        yield { value: d.value, data: m.data, headers: m.headers };
      }
    } finally {
      this.close();
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for await (const r of this.replies()) yield r.value;
  }
}

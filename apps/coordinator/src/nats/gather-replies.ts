// One request to everyone listening on a subject, and their answers as they come: the trace
// collection and the service groups' status ask this way. Each reply that is JSON and fits
// `schema` is yielded (anyone may answer: the rest are dropped) until `waitMs` is over, nobody
// listens (NATS answers 503 at once), or the caller stops: `break`, or `close()` from a timer.
import { JSONCodec, NatsConnection, Subscription, createInbox } from 'nats';
import { z } from 'zod';

const json = JSONCodec();

export class GatherReplies<T> implements AsyncIterable<T> {
  private readonly sub: Subscription;
  private readonly deadline: NodeJS.Timeout;

  constructor(
    nc: NatsConnection,
    subject: string,
    body: unknown,
    private readonly schema: z.ZodType<T>,
    waitMs: number,
  ) {
    // under the login's own prefix (natsLogin): the only inboxes its permissions let it read
    const inbox = createInbox((nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix);
    this.sub = nc.subscribe(inbox);
    this.deadline = setTimeout(() => this.close(), waitMs);
    nc.publish(subject, json.encode(body), { reply: inbox });
  }

  /** Ends the iteration (after the replies already yielded). */
  close(): void {
    clearTimeout(this.deadline);
    this.sub.unsubscribe();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for await (const m of this.sub) {
        if (m.headers?.code === 503) return;
        let body: unknown;
        try {
          body = json.decode(m.data);
        } catch {
          continue;
        }
        const parsed = this.schema.safeParse(body);
        if (parsed.success) yield parsed.data;
      }
    } finally {
      this.close();
    }
  }
}

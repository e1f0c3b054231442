// NATS request/reply with the protocol's rules: the body is validated with the operation's zod
// schema; malformed JSON or fields get a BAD_REQUEST reply naming them, and nothing changes.
import { Logger } from '@nestjs/common';
import { JSONCodec, NatsConnection, Subscription } from 'nats';
import { z } from 'zod';
import { describeIssues, errorReply } from '@cmesh/protocol';
import { ReplyError } from './reply-error';

const json = JSONCodec();
const log = new Logger('Nats');

export function respond<S extends z.ZodTypeAny>(nc: NatsConnection, subject: string, schema: S, handler: (body: z.infer<S>) => Promise<unknown>): Subscription {
  return nc.subscribe(subject, {
    queue: 'cmesh-coordinator',
    callback: (err, msg) => {
      if (err) return;
      const reply = (body: unknown) => msg.reply && msg.respond(json.encode(body));
      let raw: unknown;
      try {
        raw = msg.data.length ? json.decode(msg.data) : {};
      } catch {
        reply(errorReply('BAD_REQUEST', `${subject}: body is not valid JSON`));
        return;
      }
      const parsed = schema.safeParse(raw);
      if (!parsed.success) {
        reply(errorReply('BAD_REQUEST', `${subject}: invalid request`, describeIssues(parsed.error)));
        return;
      }
      handler(parsed.data).then(reply, (e: Error) => {
        if (e instanceof ReplyError) reply(errorReply(e.code, e.message));
        else {
          log.error(`${subject}: ${e.stack ?? e.message}`);
          reply(errorReply('INTERNAL', e.message));
        }
      });
    },
  });
}

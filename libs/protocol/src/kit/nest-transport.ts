// NATS request/reply and events for Nest's @MessagePattern/@EventPattern controllers, through the
// one guarded decoder (Inbound) and on the process's one NATS connection.
//
// Why not @nestjs/microservices' own NATS transport: it opens a connection of its own, decodes
// JSON itself (no size limit, no __proto__ stripping, no cmesh_rejected_messages_total, a parse
// error escapes as an unhandled exception), replies in its own envelope ({response, isDisposed})
// where cmesh's subjects answer the protocol's bodies ({ok: ...}), and subscribes every request
// pattern with one queue group for all or none. This strategy does only the wiring: each handler's
// pattern names a subject of the cluster, its `schema` (the decorator's extras) validates the
// body in Inbound, request patterns share a queue group (so one coordinator replica answers), and
// whatever the handler returns is the reply body exactly.
import { ArgumentsHost, Catch, RpcExceptionFilter } from '@nestjs/common';
import { CustomTransportStrategy, MessageHandler, Server } from '@nestjs/microservices';
import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { Observable, isObservable, lastValueFrom, throwError } from 'rxjs';
import type { z } from 'zod';
import type { Inbound } from './inbound-handler';

/** The extras of a cmesh NATS pattern: `@MessagePattern('agents.register', { schema })`. */
export interface InboundPatternExtras {
  schema: z.ZodTypeAny;
}

/** What a handler gets beside the body: `handle(@Payload() body, @Ctx() ctx: InboundContext)`. */
export interface InboundContext {
  /** the subject the message came on: the subscription's, wildcards filled in */
  subject: string;
  /** the request's reply subject (a login's inbox names the login: _INBOX.<user>) */
  reply?: string;
}

export interface InboundTransportOptions {
  /** the process's NATS connection (the same one its services publish on) */
  connection: () => NatsConnection | Promise<NatsConnection>;
  /** the process's decoder: its counter and rate-limited log */
  inbound: () => Inbound;
  /** the subject a pattern names (the cluster's, see clusterSubject) */
  subject: (pattern: string) => string;
  /** queue group of the request/reply patterns (events reach every subscriber) */
  requestQueue?: string;
}

export class InboundTransport extends Server implements CustomTransportStrategy {
  private subs: Subscription[] = [];

  constructor(private readonly opts: InboundTransportOptions) {
    super();
  }

  async listen(callback: (err?: unknown) => void): Promise<void> {
    try {
      const nc = await this.opts.connection();
      const inbound = this.opts.inbound();
      for (const [pattern, handler] of this.getHandlers()) {
        const schema = (handler.extras as Partial<InboundPatternExtras> | undefined)?.schema;
        if (!schema) throw new Error(`NATS pattern ${pattern}: no schema in the decorator's extras`);
        const subject = this.opts.subject(pattern);
        // the handler's second argument: the subject it came on (an agent's id is its last token)
        const run = (body: unknown, msg: { subject: string; reply?: string }) => resultOf(handler, body, { subject: msg.subject, reply: msg.reply });
        this.subs.push(
          handler.isEventHandler
            ? nc.subscribe(subject, { callback: inbound.event(subject, schema, run) })
            : nc.subscribe(subject, { queue: this.opts.requestQueue, callback: inbound.request(subject, schema, run) }),
        );
      }
      // the server has every subscription before the app says it is up: a request sent once the
      // app is listening is answered, not refused with 503 (no responders)
      await nc.flush();
      callback();
    } catch (e) {
      this.close();
      callback(e);
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }

  on(): never {
    throw new Error('InboundTransport has no events to listen to');
  }

  unwrap<T>(): T {
    throw new Error('InboundTransport has no server of its own (it uses the process connection)');
  }
}

/**
 * For every NATS controller (`@UseFilters(InboundErrors)`): a handler's error goes back to the
 * transport as it was thrown, so Inbound answers an expected refusal with its error reply (see
 * InboundOptions.refusal) and counts and logs anything else as handler_error, naming it. Nest's
 * default RPC filter would replace both with its own {status: 'error'} object.
 */
@Catch()
export class InboundErrors implements RpcExceptionFilter<unknown> {
  catch(e: unknown, _host: ArgumentsHost): Observable<never> {
    return throwError(() => e);
  }
}

/** A Nest handler's result (a value, a promise or an observable) as one promise; its error rejects it. */
async function resultOf(handler: MessageHandler, body: unknown, ctx: InboundContext): Promise<unknown> {
  const r: unknown = await handler(body, ctx);
  return isObservable(r) ? lastValueFrom(r, { defaultValue: undefined }) : r;
}

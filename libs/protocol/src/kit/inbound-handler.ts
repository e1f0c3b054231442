// Subscription callbacks that never let a bad message or a failing handler out: each payload goes
// through the wire contract's decodeMessage, a rejection is counted and logged (rate-limited), a
// request is answered with an error reply.
import { z } from 'zod';
import { Decoded, RejectReason, decodeMessage, subjectCovers } from '../inbound';
import { JsonText, errorReply } from '../reply';
import { RateLimitedLog } from './rate-limited-log';

const encoder = new TextEncoder();

const NOT_PUBLISHED = 'delivered by a JetStream consumer, not published on the subject';

/** The parts of a nats.js Msg this uses (so the protocol library needs no NATS client). */
export interface InboundMsg {
  subject: string;
  data: Uint8Array;
  reply?: string;
  respond(data?: Uint8Array): boolean;
}

export type InboundCallback = (err: Error | null, msg: InboundMsg) => void;

export interface InboundOptions {
  /** counts a rejection (cmesh_rejected_messages_total); `subject` is the subscription's, bounded */
  count(subject: string, reason: RejectReason): void;
  /** where warnings go; called at most once per subject, reason and interval */
  warn(line: string): void;
  /** the error reply for an expected refusal a request handler threw; undefined for a failure */
  refusal?(e: unknown): unknown;
}

/** At most one warning per subject and reason in this time. */
const LOG_INTERVAL_MS = 10_000;

/**
 * Subscription callbacks for one process. `event` is for fire-and-forget subjects, `request` for
 * request/reply subjects, which answer `{ok: false, error}` when the body is rejected or the
 * handler fails. Neither lets an exception out into the NATS client's dispatch loop.
 */
export class Inbound {
  private readonly log: RateLimitedLog;

  constructor(private readonly opts: InboundOptions) {
    this.log = new RateLimitedLog(opts.warn, LOG_INTERVAL_MS);
  }

  event<S extends z.ZodTypeAny>(subject: string, schema: S, handler: (body: z.infer<S>, msg: InboundMsg) => unknown): InboundCallback {
    return (err, msg) => {
      if (err) return this.log.report(`${subject}:error`, `${subject}: subscription error: ${err.message}`);
      const d = subjectCovers(subject, msg.subject)
        ? decodeMessage(schema, msg.data)
        : ({ ok: false, reason: 'not_published', message: NOT_PUBLISHED } as const);
      if (!d.ok) return this.reject(subject, msg, d);
      call(() => handler(d.value, msg)).catch((e: unknown) => {
        // an expected refusal (an agent's event on another agent's subject) is not a failure
        if (this.opts.refusal?.(e) === undefined) return this.failed(subject, e);
        this.opts.count(subject, 'refused');
        this.log.report(`${subject}:refused`, `${subject}: refused a message: ${errorMessage(e)}`);
      });
    };
  }

  request<S extends z.ZodTypeAny>(subject: string, schema: S, handler: (body: z.infer<S>, msg: InboundMsg) => Promise<unknown>): InboundCallback {
    return (err, msg) => {
      if (err) return this.log.report(`${subject}:error`, `${subject}: subscription error: ${err.message}`);
      // not answered: its reply subject is JetStream's ack, not a caller's inbox
      if (!subjectCovers(subject, msg.subject)) return this.reject(subject, msg, { ok: false, reason: 'not_published', message: NOT_PUBLISHED });
      const d = decodeMessage(schema, msg.data, { empty: {} });
      if (!d.ok) {
        this.reject(subject, msg, d);
        return answer(msg, errorReply('BAD_REQUEST', `${subject}: ${d.message}`, d.issues));
      }
      call(() => handler(d.value, msg)).then(
        (body) => answer(msg, body),
        (e: unknown) => {
          const refusal = this.opts.refusal?.(e);
          if (refusal !== undefined) return answer(msg, refusal);
          this.failed(subject, e);
          answer(msg, errorReply('INTERNAL', errorMessage(e)));
        },
      );
    };
  }

  private failed(subject: string, e: unknown): void {
    this.opts.count(subject, 'handler_error');
    this.log.report(`${subject}:handler_error`, `${subject}: handler failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  }

  private reject(subject: string, msg: InboundMsg, d: Extract<Decoded<unknown>, { ok: false }>): void {
    this.opts.count(subject, d.reason);
    const detail = d.issues?.length ? `: ${d.issues.slice(0, 3).join('; ')}` : '';
    this.log.report(`${subject}:${d.reason}`, `${subject}: rejected a message (${d.reason}, ${msg.data.length} bytes): ${d.message}${detail}`);
  }
}

/** A handler's result as a promise, whether it returned, threw or rejected. */
function call(fn: () => unknown): Promise<unknown> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Replies when the message asked for one; a body that cannot be encoded becomes an INTERNAL error. */
function answer(msg: InboundMsg, body: unknown): void {
  if (!msg.reply) return;
  let data: Uint8Array;
  try {
    data = encoder.encode(body instanceof JsonText ? body.text : JSON.stringify(body));
  } catch (e) {
    data = encoder.encode(JSON.stringify(errorReply('INTERNAL', `reply cannot be encoded: ${errorMessage(e)}`)));
  }
  try {
    msg.respond(data);
  } catch {
    /* the connection closed: nobody is left to answer */
  }
}

// Every message either app receives from NATS goes through here: the payload is decoded and
// validated with the subject's schema, and a payload that is not JSON, is over the size limit or
// does not match is rejected with a reason, never thrown. Errors escaping a handler are caught
// and reported with the subject. Anything that can publish on the server can reach these
// subjects, so no payload may crash or wedge a process.
import { z } from 'zod';
import { JsonText, describeIssues, errorReply } from './reply';
import { RateLimitedLog } from './rate-limited-log';

export type RejectReason = 'not_json' | 'too_large' | 'invalid' | 'handler_error' | 'not_published' | 'refused';

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: RejectReason; message: string; issues?: string[] };

/** nats-server's default max_payload: the largest message a default server delivers. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** JSON.parse keeps `__proto__` as an own key; dropping it keeps later copies (Object.assign) safe. */
const dropProto = (key: string, value: unknown) => (key === '__proto__' ? undefined : value);

export interface DecodeOptions {
  /** payloads longer than this are rejected before parsing */
  maxBytes?: number;
  /** the value an empty payload stands for (requests without a body); rejected when absent */
  empty?: unknown;
}

export function decodeMessage<S extends z.ZodTypeAny>(schema: S, data: Uint8Array, opts: DecodeOptions = {}): Decoded<z.infer<S>> {
  const max = opts.maxBytes ?? DEFAULT_MAX_PAYLOAD;
  if (data.length > max) return { ok: false, reason: 'too_large', message: `payload of ${data.length} bytes is over the limit of ${max}` };
  let raw: unknown;
  if (data.length === 0 && opts.empty !== undefined) raw = opts.empty;
  else {
    try {
      const text = utf8.decode(data);
      raw = text.includes('"__proto__"') ? JSON.parse(text, dropProto) : JSON.parse(text);
    } catch {
      return { ok: false, reason: 'not_json', message: 'body is not valid JSON' };
    }
  }
  let parsed: z.ZodSafeParseResult<z.infer<S>>;
  try {
    parsed = schema.safeParse(raw);
  } catch (e) {
    // a schema's refinement that throws, or a nesting deep enough to overflow the stack
    return { ok: false, reason: 'invalid', message: `body cannot be validated: ${(e as Error).message}` };
  }
  if (!parsed.success) return { ok: false, reason: 'invalid', message: 'invalid message', issues: describeIssues(parsed.error) };
  return { ok: true, value: parsed.data };
}

/**
 * Whether `subject` is one `pattern` (a subscription's subject, with `*` and `>`) covers. A
 * JetStream push consumer can deliver a bucket's stored messages to any subject its creator
 * names, with the stream's own subject (`$KV.<bucket>.<key>`) on each message: anyone who may
 * create a consumer on a store bucket could otherwise make the server inject bytes they wrote
 * into a subject they may not publish on. A message whose subject its subscription does not cover
 * was not published there, and is refused.
 */
export function subjectCovers(pattern: string, subject: string): boolean {
  if (pattern === subject) return true;
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

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
      const d = subjectCovers(subject, msg.subject) ? decodeMessage(schema, msg.data) : ({ ok: false, reason: 'not_published', message: NOT_PUBLISHED } as const);
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

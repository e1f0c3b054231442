// Every message either app receives from NATS goes through here: the payload is decoded and
// validated with the subject's schema, and a payload that is not JSON, is over the size limit or
// does not match is rejected with a reason, never thrown (the app kit's Inbound turns a rejection
// into a count, a log line and an error reply). Anything that can publish on the server can reach
// these subjects, so no payload may crash or wedge a process.
import { z } from 'zod';
import { describeIssues } from './reply';

export type RejectReason = 'not_json' | 'too_large' | 'invalid' | 'handler_error' | 'not_published' | 'refused';

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: RejectReason; message: string; issues?: string[] };

/** nats-server's default max_payload: the largest message a default server delivers. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

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

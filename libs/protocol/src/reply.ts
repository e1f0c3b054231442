// Every NATS request gets either {ok: true, ...} or an error reply that says what is wrong.
import { z } from 'zod';

export const PROTOCOL_VERSION = 1;

/**
 * TOO_MANY_REQUESTS: a configured limit is full (the job queue); try again later (HTTP 429).
 * IDEMPOTENCY_KEY_REUSED: the request's idempotency key was used before with another request (HTTP 422).
 */
export const ERROR_CODES = [
  'BAD_REQUEST',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'CONFLICT',
  'IDEMPOTENCY_KEY_REUSED',
  'TOO_MANY_REQUESTS',
  'UNSUPPORTED_VERSION',
  'UNAVAILABLE',
  'INTERNAL',
] as const;
export const ErrorReplySchema = z.object({
  ok: z.literal(false),
  error: z.object({ code: z.enum(ERROR_CODES), message: z.string(), issues: z.array(z.string()).optional() }),
});
export type ErrorReply = z.infer<typeof ErrorReplySchema>;

/** The same refusal over REST: the HTTP status, the code and message, and the offending fields. */
export const HttpErrorSchema = z.object({
  statusCode: z.number().int(),
  code: z.enum(ERROR_CODES),
  message: z.string(),
  issues: z.array(z.string()).optional(),
});

export function errorReply(code: ErrorReply['error']['code'], message: string, issues?: string[]): ErrorReply {
  return { ok: false, error: { code, message, ...(issues ? { issues } : {}) } };
}

/** Zod issues as "path: message" lines, for error replies that name the offending field. */
export function describeIssues(err: z.ZodError): string[] {
  return err.issues.map((i) => `${i.path.length ? i.path.join('.') : '(message)'}: ${i.message}`);
}

/**
 * A reply already encoded as JSON text: the inbound transport sends it as is. For replies that
 * embed one large shared value (a rendezvous round answered to thousands of joiners), encoded once.
 */
export class JsonText {
  constructor(readonly text: string) {}

  /** stays correct where something else stringifies it */
  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

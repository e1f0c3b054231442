import type { ErrorReply } from '@cmesh/protocol';

type Code = ErrorReply['error']['code'];
const HTTP: Record<Code, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  IDEMPOTENCY_KEY_REUSED: 422,
  TOO_MANY_REQUESTS: 429,
  UNSUPPORTED_VERSION: 400,
  UNAVAILABLE: 503,
  INTERNAL: 500,
};

/** The HTTP status of an error code. */
export function httpStatus(code: Code): number {
  return HTTP[code];
}

/**
 * A refusal the caller should see as is: over NATS as an error reply, over REST as the status
 * (HttpErrorFilter). `issues` name the offending fields of an invalid request.
 */
export class ReplyError extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly issues?: string[],
  ) {
    super(message);
  }
}

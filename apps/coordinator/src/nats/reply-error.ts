import { HttpException } from '@nestjs/common';
import type { ErrorReply } from '@cmesh/protocol';

type Code = ErrorReply['error']['code'];
const HTTP: Record<Code, number> = { BAD_REQUEST: 400, NOT_FOUND: 404, CONFLICT: 409, UNSUPPORTED_VERSION: 400, UNAVAILABLE: 503, INTERNAL: 500 };

/** A refusal the caller should see as is (over NATS as an error reply, over REST as the status). */
export class ReplyError extends Error {
  constructor(
    readonly code: Code,
    message: string,
  ) {
    super(message);
  }

  toHttp(): HttpException {
    return new HttpException({ statusCode: HTTP[this.code], code: this.code, message: this.message }, HTTP[this.code]);
  }
}

/** Runs a service call for a REST handler, mapping ReplyError to its HTTP status. */
export async function rest<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof ReplyError) throw e.toHttp();
    throw e;
  }
}

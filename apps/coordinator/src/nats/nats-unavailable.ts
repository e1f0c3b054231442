// While a NATS server fails over (JetStream electing a stream's leader takes seconds), KV reads
// and writes time out or are refused as temporarily unavailable. That is not a bug of the
// request: callers get 503 UNAVAILABLE (over NATS the same code), which clients retry with the
// same idempotency key, instead of 500 INTERNAL.
import { ClosedConnectionError, DrainingConnectionError } from '@nats-io/nats-core';
import { JetStreamApiError } from '@nats-io/jetstream';
import { isTransientNatsError } from '@cmesh/collectives/nats';
import { ReplyError } from './reply-error';

function isUnavailable(e: Error): boolean {
  if (isTransientNatsError(e)) return true;
  if (e instanceof ClosedConnectionError || e instanceof DrainingConnectionError) return true;
  // JetStream's 5xx: "temporarily unavailable", "no suitable peers for placement", a leaderless stream
  if (e instanceof JetStreamApiError) return e.status >= 500;
  return (e as { code?: unknown }).code === 'NATS_CONNECTION_LOST';
}

/** The UNAVAILABLE refusal of an error NATS or JetStream raised while unavailable, else undefined. */
export function natsUnavailable(e: unknown): ReplyError | undefined {
  if (!(e instanceof Error)) return undefined;
  let x: unknown = e;
  for (let depth = 0; x instanceof Error && depth < 4 && !isUnavailable(x); depth++) x = x.cause;
  if (!(x instanceof Error && isUnavailable(x))) return undefined;
  return new ReplyError('UNAVAILABLE', `NATS is not answering (a server failing over?): ${e.message}; try again (with the same Idempotency-Key)`);
}

// JetStream's answer for a stream that does not exist (code 10059): a bucket never created or
// already deleted, which callers treat as "nothing to do" rather than as a failure.
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';

export function isStreamNotFound(e: unknown): boolean {
  return e instanceof JetStreamApiError && e.code === JetStreamApiCodes.StreamNotFound;
}

// Exactly-once requests: a caller names each logical request with a key of its own (a random
// UUID), sent again unchanged on every retry of that request (the REST header `Idempotency-Key`,
// as in the IETF httpapi draft and Stripe's API; the field `idempotencyKey` on NATS). The
// coordinator keeps key -> outcome for IDEMPOTENCY_TTL_MS, scoped to the caller's login, so a
// retry returns the first outcome (the same job, the same membership) and never acts twice; the
// same key with another request is refused (IDEMPOTENCY_KEY_REUSED, HTTP 422).
import { createHash } from 'crypto';
import { z } from 'zod';

/** The REST header (the IETF draft's name). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** How long a key is remembered: a retry later than this is a new request. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;

/** Printable ASCII without spaces, 8..255 characters: a UUID fits, an accidental `1` does not. */
export const IdempotencyKeySchema = z.string().regex(/^[\x21-\x7e]{8,255}$/, 'printable ASCII without spaces, 8 to 255 characters (a UUID, say)');

/**
 * A request's fingerprint: SHA-256 of its JSON with keys sorted, after its schema applied the
 * defaults (so `{op}` and `{op, dtype: 'float32'}` are the same request) and without the key.
 */
export function requestFingerprint(body: unknown): string {
  const canonical = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(canonical);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.keys(v)
          .filter((k) => k !== 'idempotencyKey' && (v as Record<string, unknown>)[k] !== undefined)
          .sort()
          .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return createHash('sha256')
    .update(JSON.stringify(canonical(body)))
    .digest('hex');
}

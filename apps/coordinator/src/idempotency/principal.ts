// Whose idempotency key a request carries. Over REST: the API (only the admin token may POST).
// Over NATS with authentication on: the login the reply subject names. Each login may subscribe
// only to its own inbox (`_INBOX.<user>.>`, nats-permissions.ts), so a request that names another
// login's inbox never sees the answer: a caller cannot read another's job by sending its key.
// Without authentication every caller is the same anonymous one.
import { ReplyError } from '../nats/reply-error';

export const REST_PRINCIPAL = 'rest';

export function natsPrincipal(reply: string | undefined, authenticated: boolean): string {
  if (!authenticated) return 'nats';
  const m = /^_INBOX\.([A-Za-z0-9_-]{1,64})\./.exec(reply ?? '');
  return m ? `nats:${m[1]}` : NO_INBOX;
}

/** A request whose reply subject is no login's inbox: it names nobody, and its key is refused. */
export const NO_INBOX = 'nats:(no inbox)';

/** Refuses a key no caller can own. */
export function checkKeyOwner(principal: string, what: string): void {
  if (principal === NO_INBOX)
    throw new ReplyError('FORBIDDEN', `${what}: an idempotency key needs a reply inbox of your login (_INBOX.<user>), which names whose key it is`);
}

// The live page's browser session: a browser cannot send a bearer header, so the login link
// (uiLoginLink of @cmesh/protocol) is traded for a cookie, as Jupyter does. The cookie holds no API
// token: it is `<expiry>.<HMAC of scope and expiry>`, keyed by a value derived from the replica's
// API tokens, so every replica with the same tokens accepts it and rotating a token ends every
// session. The guard honours it on GET and HEAD only: it reads, it never changes anything, which
// with SameSite leaves nothing for a cross-site request to forge.
import { createHmac } from 'crypto';
import { uiLoginToken } from '@cmesh/protocol';
import type { ApiTokens } from './api-auth.guard';
import { sameSecret } from './same-secret';

/** How long a session lasts: a working day; the login link gives a new one. */
export const UI_SESSION_S = 12 * 3600;

/** The one scope a session has. */
const SCOPE = 'ui-read';
const KEY_LABEL = 'cmesh ui session key v1';

/**
 * The cookie's name for the address the browser used (its Host header): cookies do not tell
 * ports apart, and two coordinators on one host (two local meshes) must not overwrite each
 * other's session.
 */
export function uiCookieName(host: string | undefined): string {
  return `cmesh-ui-${(host ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')}`;
}

/** The value of cookie `name` in a Cookie header (RFC 6265 `a=b; c=d`). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export class UiSessions {
  private readonly key: Buffer | undefined;
  private readonly loginTokens: string[];

  constructor(
    tokens: ApiTokens,
    private readonly nowMs: () => number = Date.now,
  ) {
    const all = [tokens.admin, tokens.read].filter((t): t is string => !!t);
    this.loginTokens = all.map(uiLoginToken);
    this.key = all.length ? createHmac('sha256', all.join('\n')).update(KEY_LABEL).digest() : undefined;
  }

  /** Whether `given` is the login token of one of this replica's API tokens. */
  loginValid(given: unknown): boolean {
    if (typeof given !== 'string' || !given) return false;
    // every candidate compared, so the time taken does not say which one matched
    return this.loginTokens.map((t) => sameSecret(given, t)).includes(true);
  }

  private sign(expiry: number): string {
    return createHmac('sha256', this.key!).update(`${SCOPE}.${expiry}`).digest('base64url');
  }

  /** A new session's cookie value. */
  issue(): string {
    if (!this.key) throw new Error('no API token: there is no session to issue');
    const expiry = Math.floor(this.nowMs() / 1000) + UI_SESSION_S;
    return `${expiry}.${this.sign(expiry)}`;
  }

  /** Whether `value` is a session this replica's tokens signed and that has not expired. */
  valid(value: string | undefined): boolean {
    if (!this.key || !value) return false;
    const m = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(value);
    if (!m) return false;
    const expiry = Number(m[1]);
    const now = Math.floor(this.nowMs() / 1000);
    // no session outlives UI_SESSION_S from now, whatever its expiry says
    if (expiry <= now || expiry > now + UI_SESSION_S) return false;
    return sameSecret(m[2], this.sign(expiry));
  }
}

// The live page's login link (`cmesh up`, `cmesh ui`): <coordinator>/ui/login?token=<login token>,
// where the login token is derived from an API token (an HMAC keyed by it), not the API token
// itself. Whoever sees the link (a terminal's scrollback, a browser's history, a shared screen)
// can read the live page, and nothing more: the API token that changes things never leaves the
// machine that holds it. The coordinator derives the same value from its own tokens to check it.
import { createHmac } from 'crypto';

export const UI_PATH = '/ui';
export const UI_LOGIN_PATH = '/ui/login';

/** Changing this label invalidates every link given out before. */
const LOGIN_LABEL = 'cmesh ui login v1';

/** The login token for `apiToken` (base64url, 43 characters). */
export function uiLoginToken(apiToken: string): string {
  return createHmac('sha256', apiToken).update(LOGIN_LABEL).digest('base64url');
}

/**
 * The link that opens the live page of the coordinator at `coordinatorUrl` in a browser: the
 * login link when there is an API token, else the page itself (a coordinator without tokens).
 */
export function uiLoginLink(coordinatorUrl: string, apiToken?: string): string {
  const base = coordinatorUrl.replace(/\/+$/, '');
  return apiToken ? `${base}${UI_LOGIN_PATH}?token=${uiLoginToken(apiToken)}` : `${base}${UI_PATH}`;
}

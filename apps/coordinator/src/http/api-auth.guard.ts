// Bearer tokens on the REST API: with CMESH_API_TOKEN (every route) and/or CMESH_API_READ_TOKEN
// (GET only) set, a request without a valid `Authorization: Bearer <token>` is a 401 and a
// read-only token on a route that changes something is a 403, both in the API's error shape
// (HttpErrorFilter). Routes marked @Public() (/health, /metrics, the live page's login) stay open.
// A GET or HEAD without an Authorization header may instead carry the live page's session cookie
// (ui-session.ts), which reads like the read-only token; on any other method the cookie is not
// even looked at. NATS handlers are not HTTP and are guarded by NATS credentials instead.
import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ReplyError } from '../nats/reply-error';
import { sameSecret } from './same-secret';
import { UiSessions, cookieValue, uiCookieName } from './ui-session';

const PUBLIC_ROUTE = 'cmesh:public-route';
/** A route any client may call without a token. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

export const API_TOKENS = Symbol('API_TOKENS');

export interface ApiTokens {
  /** may call every route */
  admin?: string;
  /** may call GET routes only */
  read?: string;
}

/** Whether the REST API asks for tokens at all. */
export const authEnabled = (t: ApiTokens): boolean => !!(t.admin || t.read);

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join('; ') : v);

interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

@Injectable()
export class ApiTokenGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(API_TOKENS) private readonly tokens: ApiTokens,
    private readonly sessions: UiSessions,
  ) {}

  canActivate(ctx: ExecutionContext): boolean {
    if (ctx.getType() !== 'http' || !authEnabled(this.tokens)) return true;
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, [ctx.getHandler(), ctx.getClass()])) return true;
    const req = ctx.switchToHttp().getRequest<HttpRequest>();
    const header = req.headers.authorization;
    const reads = req.method === 'GET' || req.method === 'HEAD';
    if (header === undefined && reads) {
      const session = cookieValue(one(req.headers.cookie), uiCookieName(one(req.headers.host)));
      if (session !== undefined) {
        if (this.sessions.valid(session)) return true;
        throw new ReplyError('UNAUTHORIZED', "the live page's session has expired or is not valid: open the login link again (cmesh ui)");
      }
    }
    const m = typeof header === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
    if (!m)
      throw new ReplyError(
        'UNAUTHORIZED',
        `a bearer token is required: Authorization: Bearer <token>${reads ? ' (a browser: open the login link cmesh ui prints)' : ''}`,
      );
    if (sameSecret(m[1], this.tokens.admin)) return true;
    if (!sameSecret(m[1], this.tokens.read)) throw new ReplyError('UNAUTHORIZED', 'the bearer token is not valid');
    if (reads) return true;
    throw new ReplyError('FORBIDDEN', `the read-only token may not ${req.method} ${req.url.split('?')[0]}`);
  }
}

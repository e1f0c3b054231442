// GET /ui/login?token=<login token>: the link `cmesh up` and `cmesh ui` print. A valid login token
// (uiLoginLink of @cmesh/protocol) becomes the live page's session cookie, HttpOnly and
// SameSite=Lax, and the browser is sent on to /ui without the token in its address bar. Lax, not
// Strict: a link followed from another site (a chat, a wiki) must still bring the cookie on the
// redirect; the cookie only reads, so a cross-site request can do nothing with it. The response is
// never stored (no-store) and sends no Referer onwards (no-referrer): its URL carries the token.
import { Controller, Get, Inject, Query, Req, Res } from '@nestjs/common';
import { ApiExcludeEndpoint } from '@nestjs/swagger';
import { UI_PATH } from '@cmesh/protocol';
import { API_TOKENS, ApiTokens, Public, authEnabled } from '../http/api-auth.guard';
import { UI_SESSION_S, UiSessions, uiCookieName } from '../http/ui-session';
import { ReplyError } from '../nats/reply-error';

/** What this uses of Express's request and response. */
interface LoginRequest {
  headers: Record<string, string | string[] | undefined>;
  secure?: boolean;
}
interface LoginResponse {
  setHeader(name: string, value: string): void;
  status(code: number): { end(): void };
}

@Public()
@Controller('ui')
export class UiLoginController {
  constructor(
    @Inject(API_TOKENS) private readonly tokens: ApiTokens,
    private readonly sessions: UiSessions,
  ) {}

  @Get('login')
  @ApiExcludeEndpoint()
  login(@Query('token') token: unknown, @Req() req: LoginRequest, @Res() res: LoginResponse): void {
    res.setHeader('cache-control', 'no-store');
    res.setHeader('referrer-policy', 'no-referrer');
    if (authEnabled(this.tokens)) {
      if (!this.sessions.loginValid(token))
        throw new ReplyError('UNAUTHORIZED', 'the login token is not valid for this coordinator: print a new link with cmesh ui');
      // Secure where the browser speaks HTTPS (directly, or to a proxy that says so)
      const secure = req.secure || req.headers['x-forwarded-proto'] === 'https' ? '; Secure' : '';
      const host = req.headers.host;
      const name = uiCookieName(Array.isArray(host) ? host[0] : host);
      res.setHeader('set-cookie', `${name}=${this.sessions.issue()}; Path=/; Max-Age=${UI_SESSION_S}; HttpOnly; SameSite=Lax${secure}`);
    }
    // a coordinator without tokens has no session to give: the page is open
    res.setHeader('location', UI_PATH);
    res.status(303).end();
  }
}

// The one exception filter of the REST API: a ReplyError (a refusal a service or ZodInputPipe
// throws, the same one NATS callers get as an error reply) becomes its HTTP status with
// {statusCode, code, message, issues?} (HttpErrorSchema). Anything else goes to Nest's own
// handling (404 for unknown routes, 500 for a bug).
import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { ReplyError, httpStatus } from '../nats/reply-error';

/** What this uses of the platform's (Express's) response. */
interface HttpResponse {
  status(code: number): { json(body: unknown): void };
  setHeader(name: string, value: string): void;
}

@Catch(ReplyError)
export class ApiErrorFilter implements ExceptionFilter<ReplyError> {
  catch(e: ReplyError, host: ArgumentsHost): void {
    const status = httpStatus(e.code);
    const res = host.switchToHttp().getResponse<HttpResponse>();
    // RFC 6750: a 401 names the scheme the client should use
    if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="cmesh"');
    res
      .status(status)
      .json({ statusCode: status, code: e.code, message: e.message, ...(e.issues ? { issues: e.issues } : {}) });
  }
}

// The REST API's one exception filter, registered globally by startCoordinator: every error in the
// standard shape {statusCode, code, message, issues?} (HttpErrorSchema), the refusals of our
// handlers (a ReplyError, the same one NATS callers get as an error reply), what Express and Nest
// answer before a handler runs (a body that is not JSON, an unsupported charset, a body over the
// size limit, an undecodable path parameter, an unknown route) and what a bug throws (500
// INTERNAL, logged, its text not sent).
// Requests Node's HTTP parser itself refuses get the same shape from httpClientErrors().
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Server } from 'http';
import type { Socket } from 'net';
import type { ErrorReply } from '@cmesh/protocol';
import { ReplyError, httpStatus } from '../nats/reply-error';
import { natsUnavailable } from '../nats/nats-unavailable';

type Code = ErrorReply['error']['code'];

interface HttpResponse {
  headersSent?: boolean;
  status(code: number): { json(body: unknown): void };
  setHeader(name: string, value: string): void;
}

/** The error code of an HTTP status that came from outside our handlers. */
function codeOfStatus(status: number): Code {
  if (status === 404) return 'NOT_FOUND';
  if (status === 409) return 'CONFLICT';
  if (status === 429) return 'TOO_MANY_REQUESTS';
  if (status === 503) return 'UNAVAILABLE';
  return status >= 500 ? 'INTERNAL' : 'BAD_REQUEST';
}

function httpExceptionMessage(e: HttpException): string {
  const r = e.getResponse();
  const m = typeof r === 'object' && r !== null ? (r as { message?: unknown }).message : r;
  const text = Array.isArray(m) ? m.join('; ') : typeof m === 'string' ? m : e.message;
  // body-parser's JSON.parse message: say what the request got wrong first
  return /JSON/.test(text) && e.getStatus() === 400 ? `request body is not valid JSON: ${text}` : text;
}

/** An http-errors error of a 4xx status meant to be shown to the client (what body-parser throws). */
function isClientHttpError(e: unknown): e is Error & { status: number } {
  const x = e as { status?: unknown; expose?: unknown } | null;
  return e instanceof Error && typeof x?.status === 'number' && x.status >= 400 && x.status < 500 && x.expose === true;
}

@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  private readonly log = new Logger('http');

  catch(e: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<HttpResponse>();
    if (res.headersSent) return;
    let status: number;
    let body: { statusCode: number; code: Code; message: string; issues?: string[] };
    const unavailable = e instanceof ReplyError ? undefined : natsUnavailable(e);
    if (unavailable) this.log.warn(`request refused: ${unavailable.message}`);
    const refusal = e instanceof ReplyError ? e : unavailable;
    if (refusal) {
      status = httpStatus(refusal.code);
      body = { statusCode: status, code: refusal.code, message: refusal.message, ...(refusal.issues ? { issues: refusal.issues } : {}) };
    } else if (e instanceof HttpException) {
      status = e.getStatus();
      body = { statusCode: status, code: codeOfStatus(status), message: httpExceptionMessage(e) };
    } else if (isClientHttpError(e)) {
      // body-parser's own errors (http-errors): an unsupported charset or encoding, a body too large
      status = e.status;
      body = { statusCode: status, code: codeOfStatus(status), message: e.message };
    } else {
      status = 500;
      this.log.error(`request failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      body = { statusCode: status, code: 'INTERNAL', message: 'internal error' };
    }
    // RFC 6750: a 401 names the scheme the client should use
    if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="cmesh"');
    res.status(status).json(body);
  }
}

/**
 * Requests Node's HTTP parser refuses (a raw non-ASCII path, a malformed header, headers over the
 * size limit) are answered before Nest sees them: in the standard shape too, then the connection is
 * closed as Node would.
 */
export function httpClientErrors(server: Server): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Socket) => {
    if (!socket.writable) return socket.destroy();
    const [status, reason] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout']
          : [400, 'Bad Request'];
    const body = JSON.stringify({ statusCode: status, code: 'BAD_REQUEST', message: `malformed HTTP request (${err.code ?? err.message})` });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}

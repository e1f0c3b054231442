// A REST handler's input, validated with the same zod schema as the NATS operation: @ApiInput
// assembles it from the body, path parameters and query string, and ZodInputPipe parses it; a
// failure is a ReplyError BAD_REQUEST naming the fields, which HttpErrorFilter answers with 400.
import { ExecutionContext, PipeTransform, createParamDecorator } from '@nestjs/common';
import { z } from 'zod';
import { describeIssues } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';

/** What this reads of the platform's (Express's) request. */
interface HttpRequest {
  body?: unknown;
  params: Record<string, string>;
  query: Record<string, unknown>;
}

class ZodInputPipe<S extends z.ZodTypeAny> implements PipeTransform<unknown, z.infer<S>> {
  constructor(private readonly schema: S) {}

  transform(value: unknown): z.infer<S> {
    const r = this.schema.safeParse(value ?? {});
    if (!r.success) throw new ReplyError('BAD_REQUEST', 'invalid request', describeIssues(r.error));
    return r.data;
  }
}

export interface InputSources {
  /** the JSON body (default: on when nothing else is named) */
  body?: boolean;
  /** schema field -> path parameter it comes from */
  params?: Record<string, string>;
  /** schema fields taken from the query string, each converted from its text (a number: Number) */
  query?: Record<string, (value: unknown) => unknown>;
}

const assemble = createParamDecorator((src: InputSources, ctx: ExecutionContext): unknown => {
  const req = ctx.switchToHttp().getRequest<HttpRequest>();
  const body = src.body || (!src.params && !src.query) ? (req.body as unknown) : undefined;
  if (!src.params && !src.query) return body;
  const out: Record<string, unknown> = { ...(body as object) };
  for (const [field, param] of Object.entries(src.params ?? {})) out[field] = req.params[param];
  for (const [field, convert] of Object.entries(src.query ?? {})) {
    // a repeated or nested parameter is an array or object: converted all the same, then refused
    if (req.query[field] !== undefined) out[field] = convert(req.query[field]);
  }
  return out;
});

/** The handler's input: `sources` (default: the body) validated with `schema`. */
export function ApiInput<S extends z.ZodTypeAny>(schema: S, sources: InputSources = {}): ParameterDecorator {
  return assemble(sources, new ZodInputPipe(schema));
}

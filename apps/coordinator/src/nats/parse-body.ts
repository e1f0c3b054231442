import { BadRequestException } from '@nestjs/common';
import { z } from 'zod';
import { describeIssues } from '@cmesh/protocol';

/** Validates a REST body with the same schema as the NATS operation; 400 naming the fields. */
export function parseBody<S extends z.ZodTypeAny>(schema: S, body: unknown): z.infer<S> {
  const r = schema.safeParse(body ?? {});
  if (!r.success) throw new BadRequestException({ statusCode: 400, code: 'BAD_REQUEST', message: 'invalid request', issues: describeIssues(r.error) });
  return r.data;
}

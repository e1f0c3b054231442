// OpenAPI request and response bodies from the protocol's zod schemas, so /docs documents exactly
// what the coordinator validates and returns. Fields that come from the URL (`fromPath`) are left
// out of a request body.
import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiResponse } from '@nestjs/swagger';
import { HttpErrorSchema } from '@cmesh/protocol';
import type { OpenAPIObject, SchemaObject } from '@nestjs/swagger';
import { z } from 'zod';

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): SchemaObject {
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as SchemaObject & { $schema?: string };
  delete json.$schema;
  return json;
}

export function ApiZodBody(schema: z.ZodType, ...fromPath: string[]): MethodDecorator {
  const json = jsonSchema(schema, 'input');
  for (const key of fromPath) {
    delete json.properties?.[key];
    json.required = json.required?.filter((r) => r !== key);
  }
  return ApiBody({ schema: json });
}

const ERROR_STATUS: Record<number, string> = {
  400: 'invalid request (the issues name the fields)',
  404: 'not found',
  409: 'conflict',
  429: 'a limit is full (the job queue): try again later',
};

/** The success body (`status`, 200 unless given) and the error bodies this route can answer. */
export function ApiZodResponse(schema: z.ZodType, opts: { status?: number; errors?: number[] } = {}): MethodDecorator {
  const errors = (opts.errors ?? [400]).map((status) =>
    ApiResponse({ status, description: ERROR_STATUS[status] ?? 'error', schema: jsonSchema(HttpErrorSchema, 'output') }),
  );
  return applyDecorators(ApiResponse({ status: opts.status ?? 200, schema: jsonSchema(schema, 'output') }), ...errors);
}

export const BEARER_SCHEME = 'bearer';
/** Routes open to anyone, token or not (Prometheus and probes reach them without one). */
const PUBLIC_PATHS = ['/health', '/metrics'];

/**
 * Every operation but the public ones requires the bearer scheme and may answer 401 and 403 (in
 * the API's error shape); the document says so whether or not this replica has tokens set, since
 * a client cannot tell replicas apart. `enforced` only goes into the description.
 */
export function declareSecurity(doc: OpenAPIObject, enforced: boolean): OpenAPIObject {
  const error = jsonSchema(HttpErrorSchema, 'output');
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const op of Object.values(item) as { security?: unknown; responses?: Record<string, unknown> }[]) {
      if (typeof op !== 'object' || !op || !('responses' in op)) continue;
      if (PUBLIC_PATHS.includes(path)) {
        op.security = [];
        continue;
      }
      op.security = [{ [BEARER_SCHEME]: [] }];
      op.responses = {
        ...op.responses,
        401: { description: 'no bearer token, or not a valid one', content: { 'application/json': { schema: error } } },
        403: { description: 'the read-only token on a route that changes something', content: { 'application/json': { schema: error } } },
      };
    }
  }
  doc.security = [{ [BEARER_SCHEME]: [] }];
  doc.info.description = `${doc.info.description ?? ''}. Bearer tokens are ${enforced ? 'required' : 'not set on this replica (CMESH_API_TOKEN)'}; /health and /metrics are open.`;
  return doc;
}

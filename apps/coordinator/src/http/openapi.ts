// OpenAPI request and response bodies from the protocol's zod schemas, so /docs documents exactly
// what the coordinator validates and returns. Fields that come from the URL (`fromPath`) are left
// out of a request body.
import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiResponse } from '@nestjs/swagger';
import { HttpErrorSchema } from '@cmesh/protocol';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
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

const ERROR_STATUS: Record<number, string> = { 400: 'invalid request (the issues name the fields)', 404: 'not found', 409: 'conflict' };

/** The success body (`status`, 200 unless given) and the error bodies this route can answer. */
export function ApiZodResponse(schema: z.ZodType, opts: { status?: number; errors?: number[] } = {}): MethodDecorator {
  const errors = (opts.errors ?? [400]).map((status) => ApiResponse({ status, description: ERROR_STATUS[status] ?? 'error', schema: jsonSchema(HttpErrorSchema, 'output') }));
  return applyDecorators(ApiResponse({ status: opts.status ?? 200, schema: jsonSchema(schema, 'output') }), ...errors);
}

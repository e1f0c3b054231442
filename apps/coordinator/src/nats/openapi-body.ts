// OpenAPI request bodies from the protocol's zod schemas, so /docs documents exactly what the
// coordinator validates. Fields that come from the URL (`fromPath`) are left out of the body.
import { ApiBody } from '@nestjs/swagger';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { z } from 'zod';

export function ApiZodBody(schema: z.ZodType, ...fromPath: string[]): MethodDecorator {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as SchemaObject & { $schema?: string };
  delete json.$schema;
  for (const key of fromPath) {
    delete json.properties?.[key];
    json.required = json.required?.filter((r) => r !== key);
  }
  return ApiBody({ schema: json });
}

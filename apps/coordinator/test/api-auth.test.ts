// Bearer tokens on the coordinator's REST API, against a real nats-server and coordinator process:
// 401 without a valid token, 403 for the read-only token on a route that changes something, both
// in the API's error shape; /health and /metrics open; the OpenAPI document declares the scheme;
// the secrets test (test/security) greps every output for the tokens.
import { randomBytes } from 'crypto';
import { HttpErrorSchema } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

const ADMIN = randomBytes(24).toString('base64url');
const READ = randomBytes(24).toString('base64url');
let nats: NatsServer;
let coord: CoordinatorProcess;

async function http(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${coord.url}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // /metrics is text
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

beforeAll(async () => {
  nats = await startNatsServer();
  coord = await startCoordinatorProcess(nats.url, { CMESH_API_TOKEN: ADMIN, CMESH_API_READ_TOKEN: READ });
}, 40000);

afterAll(async () => {
  await coord?.stop();
  await nats?.stop();
});

describe('coordinator REST API with tokens', () => {
  it('/health and /metrics answer without a token', async () => {
    expect((await http('GET', '/health')).status).toBe(200);
    const m = await http('GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toContain('cmesh_agents');
  });

  it.each([
    ['no token', undefined, /bearer token is required/],
    ['a wrong token', 'x'.repeat(32), /not valid/],
  ])('%s: 401 in the error shape, with WWW-Authenticate', async (_what, token, message) => {
    for (const [method, path] of [
      ['GET', '/agents'],
      ['GET', '/jobs'],
      ['POST', '/jobs'],
      ['DELETE', '/agents/a1'],
      ['POST', '/rendezvous/r1/join'],
    ]) {
      const r = await http(method, path, token, method === 'GET' || method === 'DELETE' ? undefined : {});
      expect([method, path, r.status]).toEqual([method, path, 401]);
      expect(HttpErrorSchema.parse(r.body)).toMatchObject({ statusCode: 401, code: 'UNAUTHORIZED' });
      expect(r.body.message).toMatch(message);
      expect(r.headers.get('www-authenticate')).toBe('Bearer realm="cmesh"');
    }
  });

  it('the read-only token reads, and gets 403 on a change; nothing changes', async () => {
    const before = await http('GET', '/groups', READ);
    expect(before.status).toBe(200);
    const r = await http('POST', '/groups', READ, { members: ['a', 'b'] });
    expect(r.status).toBe(403);
    expect(HttpErrorSchema.parse(r.body)).toMatchObject({ statusCode: 403, code: 'FORBIDDEN', message: 'the read-only token may not POST /groups' });
    expect((await http('GET', '/groups', READ)).body).toEqual(before.body);
    const rdzv = await http('POST', '/rendezvous/r9/join', READ, { nodeId: 'n1', minNodes: 1, maxNodes: 1 });
    expect(rdzv.status).toBe(403);
    expect((await http('GET', '/rendezvous/r9', ADMIN)).status).toBe(404);
  });

  it('the admin token passes to the route itself', async () => {
    expect((await http('GET', '/agents', ADMIN)).status).toBe(200);
    // past the guard: the route's own answer
    const r = await http('DELETE', '/agents/nobody', ADMIN);
    expect(r.status).toBe(404);
    expect(r.body.code).toBe('NOT_FOUND');
  });

  it('the OpenAPI document declares the bearer scheme on every route but /health', async () => {
    const doc = (await http('GET', '/docs-json')).body;
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearer: [] }]);
    const ops = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ path, method, op })),
    );
    expect(ops.length).toBeGreaterThan(10);
    for (const { path, method, op } of ops) {
      if (path === '/health') {
        expect(op.security).toEqual([]);
        continue;
      }
      expect([path, method, op.security]).toEqual([path, method, [{ bearer: [] }]]);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '403']));
    }
  });
});

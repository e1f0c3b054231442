// Fuzzing every REST route of the coordinator, against a real nats-server and coordinator process:
// hostile JSON bodies (random bytes, not JSON, truncated, mistyped, deep, large), bodies of other
// content types, path parameters that are not ids (traversal, encoded NULs, very long), junk in
// the query string, and unknown routes (CMESH_FUZZ_RUNS requests per route, default 2000 since
// each is an HTTP round trip; seeds printed). Every refusal is a 4xx with the standard error shape
// {statusCode, code, message, issues?}, never a 5xx; afterwards the process is alive and its KV
// buckets and registries are exactly as before.
import * as http from 'http';
import fc from 'fast-check';
import { HttpErrorSchema } from '@cmesh/protocol';
import { fuzzPlan, invalidJsonPayload, runFuzz } from '@cmesh/testing';
import { CoordinatorFuzzFixture, FIXTURE_AGENT, crashLines, startCoordinatorFuzzFixture } from './support/fuzz-fixture';

/** Requests in flight at once (one keep-alive connection each). */
const BATCH = 25;
/** Cases per route when CMESH_FUZZ_RUNS is unset. */
const RUNS = 2000;

interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  /** with `{id}` where a path parameter goes */
  path: string;
  /** a body the route refuses or that changes nothing (POST routes) */
  valid?: Record<string, unknown>;
  required?: string[];
  constrained?: string[];
  /** GET routes answer 200 to whatever they ignore */
  readOnly?: boolean;
}

const stranger = 'fz-nobody';
const ROUTES: Route[] = [
  { method: 'GET', path: '/agents', readOnly: true },
  { method: 'GET', path: '/agents/{id}', readOnly: true },
  {
    method: 'POST',
    path: '/agents',
    valid: { ...FIXTURE_AGENT, agentId: stranger },
    required: ['protocolVersion', 'agentId', 'name', 'host', 'device', 'backends', 'dataPlane'],
    constrained: ['protocolVersion', 'agentId'],
  },
  { method: 'POST', path: '/agents/{id}/heartbeat', valid: { busy: false }, required: ['busy'] },
  { method: 'DELETE', path: '/agents/{id}' },
  { method: 'GET', path: '/groups', readOnly: true },
  { method: 'GET', path: '/groups/{id}', readOnly: true },
  { method: 'POST', path: '/groups', valid: { members: [stranger], name: 'fz' }, required: ['members'] },
  { method: 'GET', path: '/rendezvous', readOnly: true },
  { method: 'GET', path: '/rendezvous/{id}', readOnly: true },
  {
    method: 'POST',
    path: '/rendezvous/{id}/join',
    valid: { nodeId: 'n1', minNodes: 2, maxNodes: 2, lastCallMs: 10 },
    required: ['nodeId', 'minNodes', 'maxNodes'],
    constrained: ['nodeId', 'minNodes', 'maxNodes'],
  },
  { method: 'POST', path: '/rendezvous/{id}/leave', valid: { nodeId: stranger, reason: 'fuzz' }, required: ['nodeId'], constrained: ['nodeId'] },
  { method: 'GET', path: '/jobs', readOnly: true },
  { method: 'POST', path: '/jobs', valid: { op: 'allReduce', agents: [stranger], onBusy: 'refuse' }, required: ['op'] },
  { method: 'GET', path: '/jobs/{id}', readOnly: true },
  { method: 'DELETE', path: '/jobs/{id}' },
  { method: 'GET', path: '/scans', readOnly: true },
  { method: 'GET', path: '/scans/{id}', readOnly: true },
  { method: 'GET', path: '/traces', readOnly: true },
  { method: 'GET', path: '/groups/{id}/trace', readOnly: true },
  { method: 'GET', path: '/service-groups', readOnly: true },
  { method: 'GET', path: '/service-groups/{id}', readOnly: true },
  { method: 'GET', path: '/health', readOnly: true },
  { method: 'GET', path: '/metrics', readOnly: true },
];

/** Path parameters: existing and unknown ids, and text no id may be. */
const pathParam = fc.oneof(
  { arbitrary: fc.constantFrom(stranger, FIXTURE_AGENT.agentId, 'fz-run', '1').map((s) => ({ raw: s, changes: true })), weight: 1 },
  {
    arbitrary: fc
      .oneof(
        fc.constantFrom('..', '%2e%2e', '%2F', '%00', '%', '%zz', 'a%20b', 'a*b', 'a>b', 'x'.repeat(5000), '%C0%AE', '\u00e9', '%E2%80%AE'),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).map((s) => encodeURIComponent(`${s}*`)),
      )
      .map((raw) => ({ raw, changes: false })),
    weight: 9,
  },
);

const junkQuery = fc.oneof(
  fc.constant(''),
  fc.constantFrom(
    '?limit=-1',
    '?limit=abc',
    '?limit=1e999',
    '?limit[]=1&limit[]=2',
    '?limit[a]=1',
    '?__proto__[x]=1',
    '?limit=%00',
    '?limit=99999999999',
    `?x=${'y'.repeat(6000)}`,
  ),
  fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 20 }), { maxKeys: 4 }).map((q) => `?${new URLSearchParams(q)}`),
);

interface Req {
  what: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  /** may succeed (a GET, or a valid id of the fixture on a read-only route) */
  mayPass: boolean;
}

function routeRequests(r: Route): fc.Arbitrary<Req> {
  const mk = (what: string, param: { raw: string; changes: boolean }, query: string, body?: Uint8Array, contentType = 'application/json'): Req => ({
    what,
    method: r.method,
    path: r.path.replace('{id}', param.raw) + query,
    headers: body ? { 'content-type': contentType } : {},
    body,
    // a real id on a route that writes could change state: such cases are only sent to read-only routes
    mayPass: !!r.readOnly,
  });
  const param = r.readOnly ? pathParam : pathParam.filter((p) => !p.changes);
  const arms: Array<fc.Arbitrary<Req>> = [fc.tuple(param, junkQuery).map(([p, q]) => mk('path and query', p, q))];
  if (r.valid) {
    const body = invalidJsonPayload(r.valid, { required: r.required!, constrained: r.constrained, maxBytes: 200 * 1024 });
    const ok = { raw: r.path.includes('{id}') ? (r.path.startsWith('/rendezvous') ? 'fz-new' : stranger) : '', changes: false };
    arms.push(body.map((b) => mk(`body: ${b.what}`, ok, '', b.data)));
    arms.push(
      fc
        .tuple(
          fc.constantFrom(
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
            'application/json; charset=latin1',
            'application/xml',
            'application/json; charset=utf-16',
          ),
          body,
        )
        .map(([ct, b]) => mk(`content-type ${ct}: ${b.what}`, ok, '', b.data, ct)),
    );
  } else {
    arms.push(fc.tuple(param, fc.uint8Array({ minLength: 1, maxLength: 300 })).map(([p, b]) => mk('unexpected body', p, '', b)));
  }
  return fc.oneof(...arms);
}

let fx: CoordinatorFuzzFixture;
let before: Record<string, unknown>;
let agent: http.Agent;

function send(base: URL, q: Req): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: base.hostname,
        port: base.port,
        method: q.method,
        path: q.path,
        headers: { ...q.headers, ...(q.body ? { 'content-length': String(q.body.length) } : {}) },
        agent,
        timeout: 20_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(q.body ? Buffer.from(q.body) : undefined);
  });
}

/** What is wrong with an answer, or undefined when it is fine. */
function judge(q: Req, status: number, body: string): string | undefined {
  if (status >= 200 && status < 300) return q.mayPass ? undefined : `${status} to a request that should be refused`;
  if (status >= 500) return `${status} (a server error)`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `${status} without a JSON body`;
  }
  const e = HttpErrorSchema.strict().safeParse(parsed);
  if (!e.success) return `${status} not in the standard error shape`;
  if (e.data.statusCode !== status) return `statusCode ${e.data.statusCode} in a ${status} answer`;
  return undefined;
}

beforeAll(async () => {
  fx = await startCoordinatorFuzzFixture();
  before = await fx.snapshot();
  agent = new http.Agent({ keepAlive: true, maxSockets: BATCH });
}, 60_000);

afterAll(async () => {
  agent?.destroy();
  await fx?.stop();
});

/** Answers slower than this are printed (the first few per route): a route that stalls says where. */
const SLOW_MS = 5000;

async function fuzzRequests(entryPoint: string, arb: fc.Arbitrary<Req>) {
  const plan = fuzzPlan(entryPoint, BATCH, RUNS);
  const base = new URL(fx.coord.url);
  const started = Date.now();
  let slow = 0;
  const bad = await runFuzz(plan, fc.array(arb, { minLength: BATCH, maxLength: BATCH }), async (reqs) => {
    const wrong: string[] = [];
    await Promise.all(
      reqs.map(async (q) => {
        let why: string | undefined;
        let got = '';
        const t0 = Date.now();
        try {
          const r = await send(base, q);
          const ms = Date.now() - t0;
          if (ms > SLOW_MS && slow++ < 5) process.stdout.write(`fuzz ${entryPoint}: ${q.method} ${q.path.slice(0, 80)} (${q.what}) answered after ${ms} ms\n`);
          got = `${r.status} ${r.body.slice(0, 200)}`;
          why = judge(q, r.status, r.body);
        } catch (e) {
          why = `no answer: ${(e as Error).message}`;
        }
        if (why) wrong.push(`${q.method} ${q.path.slice(0, 120)} (${q.what}, ${q.body?.length ?? 0} bytes ${q.headers['content-type'] ?? ''}): ${why}: ${got}`);
      }),
    );
    return wrong;
  });
  expect(bad.slice(0, 20)).toEqual([]);
  expect(await fx.healthy()).toBe(true);
  expect(await fx.snapshot()).toEqual(before);
  expect(crashLines(fx.output)).toEqual([]);
  process.stdout.write(`fuzz ${entryPoint}: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

describe('coordinator REST routes under fuzzing', () => {
  it.each(ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))(
    '%s',
    async (name, r) => {
      await fuzzRequests(`coordinator rest ${name}`, routeRequests(r));
    },
    180_000,
  );

  it('unknown routes and methods', async () => {
    const arb = fc
      .tuple(
        fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'),
        fc.oneof(
          fc.constantFrom('/', '/agents/a/b/c', '/jobs/x/y', '/nope', '/%', '/..%2f..%2fetc/passwd', `/${'a'.repeat(8000)}`),
          fc.webPath().filter((p) => !/^\/(agents|groups|rendezvous|jobs|traces|health|metrics|docs)/.test(p)),
        ),
      )
      .map(([method, path]): Req => ({ what: 'unknown route', method, path: path.startsWith('/') ? path : `/${path}`, headers: {}, mayPass: false }));
    await fuzzRequests('coordinator rest unknown routes', arb);
  }, 180_000);
});

describe('coordinator REST routes with bearer tokens under fuzzing', () => {
  const TOKEN = 'fz-admin-token-0123456789abcdef';
  const READ = 'fz-read-token-0123456789abcdef';
  let fxa: CoordinatorFuzzFixture;
  let beforeAuth: Record<string, unknown>;

  beforeAll(async () => {
    fxa = await startCoordinatorFuzzFixture({ token: TOKEN, readToken: READ });
    beforeAuth = await fxa.snapshot();
  }, 60_000);

  afterAll(async () => {
    await fxa?.stop();
  });

  it('requests without the token, with another one, or with the read token on a route that writes', async () => {
    // every route and method, valid bodies included: only the Authorization header is wrong
    const header = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom(
        'Bearer',
        'Bearer ',
        'bearer',
        'Basic Zm9vOmJhcg==',
        `Bearer ${TOKEN.slice(0, -1)}`,
        `Bearer ${TOKEN}x`,
        `Token ${TOKEN}`,
        TOKEN,
        `Bearer ${'a'.repeat(8000)}`,
        `Bearer ${READ}`,
      ),
      fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 80 }).map((t) => `Bearer ${t}`),
    );
    const arb = fc.tuple(fc.constantFrom(...ROUTES), header).map(([r, auth]): Req & { route: Route; auth?: string } => {
      const body = r.valid ? Buffer.from(JSON.stringify(r.valid)) : undefined;
      const path = r.path.replace('{id}', r.path.startsWith('/rendezvous') ? 'fz-new' : stranger);
      return {
        what: `auth ${JSON.stringify(auth?.slice(0, 40))}`,
        method: r.method,
        path,
        headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(auth !== undefined ? { authorization: auth } : {}) },
        body,
        mayPass: false,
        route: r,
        auth,
      };
    });
    const plan = fuzzPlan('coordinator rest bearer tokens', BATCH, RUNS);
    const base = new URL(fxa.coord.url);
    const started = Date.now();
    const bad = await runFuzz(plan, fc.array(arb, { minLength: BATCH, maxLength: BATCH }), async (reqs) => {
      const wrong: string[] = [];
      await Promise.all(
        reqs.map(async (q) => {
          const r = await send(base, q).catch((e: Error) => ({ status: 0, body: e.message }));
          const open = q.route.path === '/health' || q.route.path === '/metrics';
          const readOnlyOk = q.auth === `Bearer ${READ}` && q.method === 'GET';
          // the public routes and the read token on a GET pass; everything else is 401, or 403 for the read token
          const want = open || readOnlyOk ? 'pass' : q.auth === `Bearer ${READ}` ? 403 : 401;
          if (want === 'pass') {
            if (r.status === 401 || r.status === 403 || r.status >= 500) wrong.push(`${q.method} ${q.path} (${q.what}): ${r.status} ${r.body.slice(0, 200)}`);
            return;
          }
          const why = r.status !== want ? `${r.status}, not ${want}` : judge({ ...q, mayPass: false }, r.status, r.body);
          if (why) wrong.push(`${q.method} ${q.path} (${q.what}): ${why}: ${r.body.slice(0, 200)}`);
        }),
      );
      return wrong;
    });
    expect(bad.slice(0, 20)).toEqual([]);
    expect(await fxa.healthy()).toBe(true);
    expect(await fxa.snapshot()).toEqual(beforeAuth);
    expect(crashLines(fxa.output)).toEqual([]);
    process.stdout.write(`fuzz coordinator rest bearer tokens: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }, 180_000);
});

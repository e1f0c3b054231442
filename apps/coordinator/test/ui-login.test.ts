// The live page's login, against a real nats-server and coordinator process with both API tokens
// set: the login link (a login token made from an API token) becomes an HttpOnly, SameSite cookie
// and a redirect to /ui, never stored and sending no Referer; wrong, tampered, expired or foreign
// tokens and sessions get 401; the cookie opens /ui and every GET route of the API, and is refused
// on every route that changes something (all of them, as the OpenAPI document lists them), which
// then did not change; arbitrary Cookie headers and login tokens (fast-check) get 401 and nothing
// else. A coordinator without tokens sends the browser straight on to /ui.
import { randomBytes } from 'crypto';
import fc from 'fast-check';
import { request } from 'http';
import { HttpErrorSchema, uiLoginLink, uiLoginToken } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { UI_SESSION_S, UiSessions } from '../src/http/ui-session';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

const ADMIN = randomBytes(24).toString('base64url');
const READ = randomBytes(24).toString('base64url');
let nats: NatsServer;
let coord: CoordinatorProcess;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request as a browser would send it (node:http: Cookie and Host as given, redirects not followed). */
function http(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(`${base}${path}`, { method, headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** The cookie's name for the coordinator's own address, as a browser at coord.url sends it. */
const cookieName = () => `cmesh-ui-127-0-0-1-${new URL(coord.url).port}`;
const withCookie = (value: string, name = cookieName()) => ({ cookie: `other=1; ${name}=${value}` });

async function login(token: string): Promise<Answer> {
  return http(coord.url, 'GET', `/ui/login?token=${encodeURIComponent(token)}`);
}

/** A session cookie from the login link of `apiToken`. */
async function session(apiToken = ADMIN): Promise<string> {
  const r = await login(uiLoginToken(apiToken));
  expect(r.status).toBe(303);
  return /=([^;]+);/.exec(String(r.headers['set-cookie']))![1];
}

function expect401(r: Answer, message: RegExp): void {
  expect(r.status).toBe(401);
  const body = HttpErrorSchema.parse(JSON.parse(r.text));
  expect(body).toMatchObject({ statusCode: 401, code: 'UNAUTHORIZED' });
  expect(body.message).toMatch(message);
}

/** Every operation of the OpenAPI document, its path parameters filled in. */
async function operations(): Promise<{ method: string; path: string }[]> {
  const doc = JSON.parse((await http(coord.url, 'GET', '/docs-json')).text) as { paths: Record<string, Record<string, unknown>> };
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.keys(item).map((method) => ({ method: method.toUpperCase(), path: path.replace(/\{[^}]+\}/g, 'nothing-here') })),
  );
}

beforeAll(async () => {
  nats = await startNatsServer();
  coord = await startCoordinatorProcess(nats.url, { CMESH_API_TOKEN: ADMIN, CMESH_API_READ_TOKEN: READ });
}, 40000);

afterAll(async () => {
  await coord?.stop();
  await nats?.stop();
});

describe('the live page login', () => {
  it.each([
    ['the API token', ADMIN],
    ['the read-only token', READ],
  ])("%s's login link: an HttpOnly, SameSite cookie and a redirect to /ui, never stored, no Referer", async (_what, apiToken) => {
    const link = uiLoginLink(coord.url, apiToken);
    expect(link).toBe(`${coord.url}/ui/login?token=${uiLoginToken(apiToken)}`);
    expect(link).not.toContain(apiToken);
    const r = await http(coord.url, 'GET', new URL(link).pathname + new URL(link).search);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe('/ui');
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.headers['referrer-policy']).toBe('no-referrer');
    const cookies = r.headers['set-cookie'] as string[];
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatch(new RegExp(`^${cookieName()}=\\d+\\.[A-Za-z0-9_-]{43}; Path=/; Max-Age=${UI_SESSION_S}; HttpOnly; SameSite=Lax$`));
    // the cookie carries no token: neither API token nor the login token
    for (const secret of [ADMIN, READ, uiLoginToken(ADMIN), uiLoginToken(READ)]) expect(cookies[0]).not.toContain(secret);
    const expiry = Number(/=(\d+)\./.exec(cookies[0])![1]);
    expect(Math.abs(expiry - (Date.now() / 1000 + UI_SESSION_S))).toBeLessThan(60);
  });

  it('a proxy that says the browser speaks HTTPS gets a Secure cookie', async () => {
    const r = await http(coord.url, 'GET', `/ui/login?token=${uiLoginToken(ADMIN)}`, { 'x-forwarded-proto': 'https' });
    expect(String(r.headers['set-cookie'])).toMatch(/; HttpOnly; SameSite=Lax; Secure$/);
  });

  it('a wrong, tampered, missing or repeated login token: 401, no cookie, still never stored', async () => {
    const good = uiLoginToken(ADMIN);
    const flipped = good.slice(0, 10) + (good[10] === 'A' ? 'B' : 'A') + good.slice(11);
    for (const path of [
      `/ui/login?token=${encodeURIComponent(ADMIN)}`, // the API token itself is not a login token
      `/ui/login?token=${flipped}`,
      `/ui/login?token=${uiLoginToken(randomBytes(24).toString('base64url'))}`,
      `/ui/login?token=${good.slice(0, -1)}`,
      '/ui/login?token=',
      '/ui/login',
      `/ui/login?token=${good}&token=${good}`,
    ]) {
      const r = await http(coord.url, 'GET', path);
      expect([path, r.status, r.headers['set-cookie']]).toEqual([path, 401, undefined]);
      expect401(r, /login token is not valid for this coordinator/);
      expect(r.headers['cache-control']).toBe('no-store');
      expect(r.headers['referrer-policy']).toBe('no-referrer');
    }
  });

  it('the cookie opens /ui (GET and HEAD) and every GET route; without it they are 401', async () => {
    const value = await session();
    const page = await http(coord.url, 'GET', '/ui', withCookie(value));
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<h1>cmesh: cluster default</h1>');
    expect((await http(coord.url, 'HEAD', '/ui', withCookie(value))).status).toBe(200);
    expect401(await http(coord.url, 'GET', '/ui'), /bearer token is required.*login link cmesh ui prints/);
    // a session from the read-only token's link reads the same
    expect((await http(coord.url, 'GET', '/ui', withCookie(await session(READ)))).status).toBe(200);

    const gets = (await operations()).filter((o) => o.method === 'GET' && !['/health', '/metrics'].includes(o.path));
    expect(gets.map((o) => o.path)).toEqual(expect.arrayContaining(['/agents', '/jobs', '/scans', '/groups', '/service-groups', '/traces']));
    for (const { path } of gets) {
      const r = await http(coord.url, 'GET', path, withCookie(value));
      // past the guard: the route's own answer (404 for the made-up ids)
      expect([path, r.status]).toEqual([path, path.includes('nothing-here') ? 404 : 200]);
      expect((await http(coord.url, 'GET', path)).status).toBe(401);
    }
  }, 60000);

  it('the cookie is refused on every route that changes something, and nothing changed', async () => {
    const value = await session();
    const bearer = { authorization: `Bearer ${ADMIN}` };
    const state = () => Promise.all(['/agents', '/jobs', '/groups', '/scans', '/rendezvous'].map(async (p) => (await http(coord.url, 'GET', p, bearer)).text));
    const before = await state();
    const changes = (await operations()).filter((o) => o.method !== 'GET');
    expect(changes.map((o) => `${o.method} ${o.path}`)).toEqual(
      expect.arrayContaining([
        'DELETE /agents/nothing-here',
        'DELETE /jobs/nothing-here',
        'POST /agents',
        'POST /groups',
        'POST /jobs',
        'POST /scans',
        'POST /rendezvous/nothing-here/join',
        'POST /rendezvous/nothing-here/leave',
      ]),
    );
    // bodies a route would take, had the cookie let the request through
    const body = { members: ['a', 'b'], nodeId: 'n1', minNodes: 1, maxNodes: 1 };
    for (const { method, path } of changes) {
      const r = await http(coord.url, method, path, withCookie(value), method === 'POST' ? body : undefined);
      expect([method, path, r.status]).toEqual([method, path, 401]);
      expect401(r, /^a bearer token is required: Authorization: Bearer <token>$/);
    }
    expect(await state()).toEqual(before);
    // the same routes with the API token beside the cookie get past the guard (the route's own answer)
    for (const { method, path } of changes.filter((o) => o.method === 'DELETE')) {
      expect([method, path, (await http(coord.url, method, path, { ...withCookie(value), ...bearer })).status]).toEqual([method, path, 404]);
    }
  }, 60000);

  it('a tampered, expired, foreign or misnamed session: 401 (or no credential at all)', async () => {
    const value = await session();
    const [expiry, sig] = value.split('.');
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const hour = 3600_000;
    const tokens = { admin: ADMIN, read: READ };
    for (const [what, bad] of [
      ['signature changed', `${expiry}.${flip(sig, 5)}`],
      ['expiry moved on', `${Number(expiry) + 3600}.${sig}`],
      ['expired an hour ago', new UiSessions(tokens, () => Date.now() - UI_SESSION_S * 1000 - hour).issue()],
      ['expiry beyond a session', new UiSessions(tokens, () => Date.now() + 2 * hour).issue()],
      ['signed by other tokens', new UiSessions({ admin: randomBytes(24).toString('base64url') }).issue()],
      ['signed by the read token alone', new UiSessions({ read: READ }).issue()],
      ['an API token', ADMIN],
      ['empty', ''],
    ]) {
      const r = await http(coord.url, 'GET', '/ui', withCookie(bad));
      expect([what, r.status]).toEqual([what, 401]);
      expect401(r, /session has expired or is not valid: open the login link again \(cmesh ui\)/);
    }
    // a valid session under another coordinator's cookie name is not this one's credential
    expect401(await http(coord.url, 'GET', '/ui', withCookie(value, 'cmesh-ui-127-0-0-1-1')), /bearer token is required/);
    // a bearer header decides alone: a wrong one with a good cookie is a 401
    expect401(await http(coord.url, 'GET', '/ui', { ...withCookie(value), authorization: 'Bearer wrong-wrong-wrong-wrong' }), /bearer token is not valid/);
  });
});

describe('the live page login under arbitrary input', () => {
  const ascii = (maxLength: number) => fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength });

  it('any Cookie header on a GET, any login token: 401 in the error shape, no cookie, no 5xx', async () => {
    const name = cookieName();
    const session = fc.oneof(
      ascii(80),
      fc.tuple(fc.integer({ min: 0, max: 2 ** 40 }), fc.stringMatching(/^[A-Za-z0-9_-]{43}$/)).map(([e, sig]) => `${e}.${sig}`),
    );
    const cookie = fc.oneof(
      ascii(200),
      session.map((v) => `${name}=${v}`),
      fc.tuple(ascii(20), session).map(([junk, v]) => `${junk}; ${name}=${v}; ${junk}`),
    );
    await fc.assert(
      fc.asyncProperty(cookie, ascii(120), async (c, token) => {
        const page = await http(coord.url, 'GET', '/ui', { cookie: c });
        expect401(page, /session has expired or is not valid|bearer token is required/);
        const r = await http(coord.url, 'GET', `/ui/login?token=${encodeURIComponent(token)}`);
        expect([r.status, r.headers['set-cookie']]).toEqual([401, undefined]);
      }),
      { numRuns: 150 },
    );
    expect((await http(coord.url, 'GET', '/health')).status).toBe(200);
  }, 60000);
});

describe('the live page login on a coordinator without tokens', () => {
  let open: CoordinatorProcess;
  beforeAll(async () => {
    open = await startCoordinatorProcess(nats.url, { CMESH_API_TOKEN: '', CMESH_API_READ_TOKEN: '', CMESH_CLUSTER: 'open' });
  }, 40000);
  afterAll(async () => open?.stop());

  it('sends the browser on to /ui with no cookie', async () => {
    const r = await http(open.url, 'GET', '/ui/login?token=anything');
    expect([r.status, r.headers.location, r.headers['set-cookie']]).toEqual([303, '/ui', undefined]);
    expect((await http(open.url, 'GET', '/ui')).status).toBe(200);
  });
});

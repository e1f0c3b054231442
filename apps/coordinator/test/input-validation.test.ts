// Requests the coordinator must refuse without changing anything, against a real nats-server and a
// real coordinator process: leaves by nodes that are not in the run, a waiting node leaving, and ids
// that cannot be KV keys (REST and NATS alike).
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { AGENT_SUBJECTS, AgentRecordSchema, GROUP_SUBJECTS, HttpErrorSchema, PROTOCOL_VERSION, RDZV_SUBJECTS } from '@cmesh/protocol';
import { z } from 'zod';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

let nats: NatsServer;
let nc: NatsConnection;
let coord: CoordinatorProcess | undefined;

async function req(subject: string, body: unknown): Promise<any> {
  const m = await nc.request(subject, JSON.stringify(body), { timeout: 5000 });
  return m.json();
}

async function http(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${coord!.url}${path}`, {
    method,
    ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/** The stored record, read without closing anything (the get path may close overdue rounds). */
async function record(runId: string): Promise<any> {
  return (await req(RDZV_SUBJECTS.get, { runId })).record;
}

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: nats.url });
  coord = await startCoordinatorProcess(nats.url);
}, 40000);

afterAll(async () => {
  await nc?.close();
  await coord?.stop();
  await nats?.stop();
});

describe('rendezvous leave by a node that is not in the run', () => {
  beforeAll(async () => {
    for (const nodeId of ['n1', 'n2']) await req(RDZV_SUBJECTS.join, { runId: 'r1', nodeId, minNodes: 2, maxNodes: 2, lastCallMs: 0 });
  });

  it('REST: no nodeId is a 400 naming the field; nothing changes', async () => {
    const before = await record('r1');
    const r = await http('POST', '/rendezvous/r1/leave', {});
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'BAD_REQUEST', issues: [expect.stringMatching(/^nodeId: /)] });
    expect(await record('r1')).toEqual(before);
  });

  it('REST: a stranger is a 404 "node stranger is not in run r1"; nothing changes', async () => {
    const before = await record('r1');
    const r = await http('POST', '/rendezvous/r1/leave', { nodeId: 'stranger' });
    expect(r.status).toBe(404);
    expect(r.body).toMatchObject({ code: 'NOT_FOUND', message: 'node stranger is not in run r1' });
    expect(await record('r1')).toEqual(before);
  });

  it('NATS: a stranger is NOT_FOUND; nothing changes', async () => {
    const before = await record('r1');
    const r = await req(RDZV_SUBJECTS.leave, { runId: 'r1', nodeId: 'stranger' });
    expect(r).toEqual({ ok: false, error: { code: 'NOT_FOUND', message: 'node stranger is not in run r1' } });
    expect(await record('r1')).toEqual(before);
  });

  it('a member still leaves and opens the next round', async () => {
    const r = await http('POST', '/rendezvous/r1/leave', { nodeId: 'n2' });
    expect(r.status).toBe(201);
    expect(r.body.record).toMatchObject({ round: 1, state: 'open', participants: [expect.objectContaining({ nodeId: 'n1' })] });
  });
});

describe('rendezvous leave by a node that only waits', () => {
  it('removes it from the waiting list and keeps the closed round', async () => {
    for (const nodeId of ['n1', 'n2']) await req(RDZV_SUBJECTS.join, { runId: 'w1', nodeId, minNodes: 2, maxNodes: 2, lastCallMs: 0 });
    const closed = await req(RDZV_SUBJECTS.join, { runId: 'w1', nodeId: 'n3', minNodes: 2, maxNodes: 2, lastCallMs: 0 });
    expect(closed.record).toMatchObject({ round: 0, state: 'closed', ranks: { n1: 0, n2: 1 }, waiting: ['n3'] });
    const left = await req(RDZV_SUBJECTS.leave, { runId: 'w1', nodeId: 'n3' });
    expect(left).toMatchObject({ ok: true });
    expect(left.record).toEqual({ ...closed.record, waiting: [] });
    expect(await record('w1')).toEqual({ ...closed.record, waiting: [] });
  });
});

describe('ids that cannot be KV keys are a BAD_REQUEST naming the id', () => {
  it.each([
    ['GET', '/agents/a*b', 'a*b'],
    ['DELETE', '/agents/a*b', 'a*b'],
    ['GET', '/groups/a*b', 'a*b'],
    ['GET', '/rendezvous/a%20b', 'a b'],
    ['POST', '/rendezvous/a%20b/leave', 'a b'],
  ])('REST %s %s is a 400', async (method, path, id) => {
    const r = await http(method, path, method === 'POST' ? { nodeId: 'n1' } : undefined);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('BAD_REQUEST');
    expect(JSON.stringify(r.body)).toContain(id);
  });

  it('NATS cmesh.groups.get {"id":"a*b"} is BAD_REQUEST, not INTERNAL', async () => {
    const r = await req(GROUP_SUBJECTS.get, { id: 'a*b' });
    expect(r).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST', issues: [expect.stringMatching(/^id: "a\*b": /)] } });
  });

  it('valid ids that do not exist are still 404', async () => {
    expect((await http('GET', '/agents/nobody')).status).toBe(404);
    expect((await http('GET', '/groups/999')).status).toBe(404);
    expect((await http('GET', '/rendezvous/none')).status).toBe(404);
  });
});

describe('OpenAPI', () => {
  it('documents the request bodies with the protocol schemas (path fields left out)', async () => {
    const doc = (await (await fetch(`${coord!.url}/docs-json`)).json()) as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> } }>
      >;
    };
    const body = (path: string) => doc.paths[path]?.post?.requestBody?.content['application/json']?.schema;
    expect(body('/jobs')).toMatchObject({ required: ['op'] });
    expect(Object.keys(body('/jobs')!.properties!)).toEqual(expect.arrayContaining(['op', 'sizes', 'iters', 'agents', 'onBusy']));
    expect(body('/groups')).toMatchObject({ required: ['members'] });
    expect(body('/agents')!.required).toEqual(expect.arrayContaining(['protocolVersion', 'agentId', 'host', 'backends']));
    const join = body('/rendezvous/{runId}/join')!;
    expect(join.required).toEqual(['nodeId', 'minNodes', 'maxNodes']);
    expect(join.properties).not.toHaveProperty('runId');
  });

  it('documents the response bodies (success and errors) with the protocol schemas, and real responses match them', async () => {
    type Op = { responses: Record<string, { content?: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> }> };
    const doc = (await (await fetch(`${coord!.url}/docs-json`)).json()) as { paths: Record<string, Record<string, Op>> };
    const res = (path: string, method: string, status: number) => doc.paths[path]?.[method]?.responses[String(status)]?.content?.['application/json']?.schema;
    expect(res('/jobs', 'post', 201)!.required).toEqual(expect.arrayContaining(['id', 'state', 'sweep', 'members', 'rows']));
    expect(res('/jobs', 'post', 409)!.required).toEqual(expect.arrayContaining(['statusCode', 'code', 'message']));
    expect(Object.keys(res('/jobs/{id}', 'get', 200)!.properties!)).toContain('replica');
    expect(res('/agents', 'get', 200)!.properties).toHaveProperty('agents');
    expect(res('/groups/{id}', 'get', 404)!.required).toEqual(expect.arrayContaining(['code', 'message']));
    // a join answers the whole round, or with `brief` the node's rank and the round's size
    const join = res('/rendezvous/{runId}/join', 'post', 201) as { anyOf?: { required?: string[] }[] };
    expect(join.anyOf?.map((s) => s.required)).toEqual([
      expect.arrayContaining(['ok', 'record']),
      expect.arrayContaining(['ok', 'runId', 'round', 'state', 'size', 'waiting']),
    ]);
    // what the coordinator sends is what the document says
    const agents = await (await fetch(`${coord!.url}/agents`)).json();
    expect(
      z
        .object({ agents: z.array(AgentRecordSchema) })
        .strict()
        .safeParse(agents).success,
    ).toBe(true);
    const bad = await fetch(`${coord!.url}/groups/no-such-group`);
    expect(bad.status).toBe(404);
    expect(HttpErrorSchema.strict().safeParse(await bad.json()).success).toBe(true);
    const invalid = await fetch(`${coord!.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ op: 'nope' }),
    });
    expect(invalid.status).toBe(400);
    expect(HttpErrorSchema.strict().safeParse(await invalid.json()).success).toBe(true);
  });
});

describe('protocol version', () => {
  it('an agent speaking another protocol version gets UNSUPPORTED_VERSION and is not registered', async () => {
    const agent = {
      agentId: 'future-1',
      name: 'future-1',
      host: '127.0.0.1',
      device: { kind: 'cpu', index: 0 },
      backends: [{ name: 'tcp', available: true }],
      dataPlane: { host: '127.0.0.1' },
    };
    const r = await req(AGENT_SUBJECTS.register(agent.agentId), { ...agent, protocolVersion: PROTOCOL_VERSION + 1 });
    expect(r).toMatchObject({ ok: false, error: { code: 'UNSUPPORTED_VERSION' } });
    expect(r.error.message).toMatch(new RegExp(`version ${PROTOCOL_VERSION + 1} is not supported.*speaks ${PROTOCOL_VERSION}`));
    expect((await http('GET', '/agents/future-1')).status).toBe(404);
    expect((await req(AGENT_SUBJECTS.register(agent.agentId), { ...agent, protocolVersion: PROTOCOL_VERSION })).ok).toBe(true);
  });
});

// The control plane against a real nats-server and real coordinator processes: registration and
// heartbeats, rendezvous rounds (16 agents, MIN:MAX with a late joiner, a coordinator killed -9
// mid-rendezvous), groups, lost agents, malformed messages.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { AGENT_SUBJECTS, GROUP_SUBJECTS, PROTOCOL_VERSION, RDZV_SUBJECTS } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

let nats: NatsServer;
let nc: NatsConnection;
let coord: CoordinatorProcess | undefined;

async function req(subject: string, body: unknown): Promise<any> {
  const m = await nc.request(subject, typeof body === 'string' ? new TextEncoder().encode(body) : JSON.stringify(body), { timeout: 5000 });
  return m.json();
}

function registration(agentId: string) {
  return {
    protocolVersion: PROTOCOL_VERSION,
    agentId,
    name: agentId,
    host: '127.0.0.1',
    device: { kind: 'cpu', index: 0 },
    backends: [
      { name: 'tcp', available: true },
      { name: 'nccl', available: false, reason: 'no GPU' },
    ],
    dataPlane: { host: '127.0.0.1' },
  };
}

async function untilClosed(runId: string, nodeId: string, timeoutMs = 10000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await req(RDZV_SUBJECTS.get, { runId, nodeId }).catch(() => undefined);
    if (r?.ok && r.record.state === 'closed' && r.rank !== undefined) return r;
    if (Date.now() > deadline) throw new Error(`rendezvous ${runId} did not close for ${nodeId}: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: nats.url });
  coord = await startCoordinatorProcess(nats.url, { CMESH_HEARTBEAT_MS: '200', CMESH_MISSED_HEARTBEATS: '3', CMESH_LEASE_MS: '600' });
}, 40000);

afterAll(async () => {
  await nc?.close();
  await coord?.stop();
  await nats?.stop();
});

it('16 agents register and rendezvous into one group with deterministic ranks', async () => {
  const ids = Array.from({ length: 16 }, (_, i) => `agent-${String(i).padStart(2, '0')}`);
  const regs = await Promise.all(ids.map((id) => req(AGENT_SUBJECTS.register(id), registration(id))));
  expect(regs.every((r) => r.ok && r.agent.state === 'ready')).toBe(true);
  const shuffled = [...ids].reverse();
  await Promise.all(shuffled.map((id) => req(RDZV_SUBJECTS.join, { runId: 'r16', nodeId: id, minNodes: 16, maxNodes: 16 })));
  const closed = await Promise.all(ids.map((id) => untilClosed('r16', id)));
  expect(closed.map((c) => c.rank)).toEqual(ids.map((_, i) => i));
  expect(closed[0].record.round).toBe(0);
  const group = await req(GROUP_SUBJECTS.create, { members: ids });
  expect(group).toMatchObject({ ok: true, group: { members: ids, storePrefix: expect.stringMatching(/^groups\//) } });
  const listed = (await (await fetch(`${coord!.url}/groups/${group.group.id}`)).json()) as any;
  expect(listed.members).toEqual(ids);
  const agents = (await (await fetch(`${coord!.url}/agents`)).json()) as any;
  expect(agents.agents.map((a: any) => a.agentId)).toEqual(expect.arrayContaining(ids));
  const metrics = await (await fetch(`${coord!.url}/metrics`)).text();
  // under load some may already be lost (200 ms heartbeats are not sent here): count every state
  const byState = [...metrics.matchAll(/^cmesh_agents\{state="(\w+)",cluster="default"\} (\d+)$/gm)].map((m) => Number(m[2]));
  expect(byState.reduce((a, b) => a + b, 0)).toBe(16);
  expect(metrics).toMatch(/^cmesh_groups\{cluster="default"\} 1$/m);
  expect(metrics).toMatch(/^cmesh_rendezvous_duration_seconds_count\{cluster="default"\} 1$/m);
  expect(metrics).toMatch(/^cmesh_agent_heartbeat_gap_seconds\{agent="agent-00",cluster="default"\} /m);
  expect(metrics).toMatch(/^process_cpu_seconds_total\{cluster="default"\} /m);
  expect(metrics).toMatch(/^cmesh_component_info\{component="coordinator",protocol_version="1",cluster="default"\} 1$/m);
});

it('a MIN:MAX rendezvous admits a late joiner within the last-call window, and not after it closes', async () => {
  await req(RDZV_SUBJECTS.join, { runId: 'mm', nodeId: 'a', minNodes: 2, maxNodes: 4, lastCallMs: 1500 });
  await req(RDZV_SUBJECTS.join, { runId: 'mm', nodeId: 'b', minNodes: 2, maxNodes: 4, lastCallMs: 1500 });
  await new Promise((r) => setTimeout(r, 500));
  await req(RDZV_SUBJECTS.join, { runId: 'mm', nodeId: 'c', minNodes: 2, maxNodes: 4, lastCallMs: 1500 });
  const r = await untilClosed('mm', 'c');
  expect(r.record.ranks).toEqual({ a: 0, b: 1, c: 2 });
  const late = await req(RDZV_SUBJECTS.join, { runId: 'mm', nodeId: 'd', minNodes: 2, maxNodes: 4, lastCallMs: 1500 });
  expect(late.rank).toBeUndefined();
  expect(late.record.waiting).toEqual(['d']);
  // a member leaves: the next round opens with the others and the waiting node
  const next = await req(RDZV_SUBJECTS.leave, { runId: 'mm', nodeId: 'b' });
  expect(next.record).toMatchObject({ round: 1 });
  const r2 = await untilClosed('mm', 'd');
  expect(r2.record.ranks).toEqual({ a: 0, c: 1, d: 2 });
});

it('a coordinator killed -9 mid-rendezvous loses nothing: another one completes it', async () => {
  await req(RDZV_SUBJECTS.join, { runId: 'restart', nodeId: 'n1', minNodes: 3, maxNodes: 3 });
  await req(RDZV_SUBJECTS.join, { runId: 'restart', nodeId: 'n2', minNodes: 3, maxNodes: 3 });
  await coord!.kill9();
  coord = await startCoordinatorProcess(nats.url, { CMESH_HEARTBEAT_MS: '200', CMESH_MISSED_HEARTBEATS: '3', CMESH_LEASE_MS: '600' });
  const r = await req(RDZV_SUBJECTS.join, { runId: 'restart', nodeId: 'n3', minNodes: 3, maxNodes: 3 });
  expect(r.record.state).toBe('closed');
  expect(r.record.ranks).toEqual({ n1: 0, n2: 1, n3: 2 });
  expect(r.rank).toBe(2);
  const agents = await req(AGENT_SUBJECTS.list, {});
  expect(agents.agents.length).toBeGreaterThanOrEqual(16); // registrations survived too
}, 60000);

it('an agent that stops heartbeating becomes lost; heartbeats keep another ready', async () => {
  await req(AGENT_SUBJECTS.register('hb-alive'), registration('hb-alive'));
  await req(AGENT_SUBJECTS.register('hb-dead'), registration('hb-dead'));
  for (let i = 0; i < 12; i++) {
    await req(AGENT_SUBJECTS.heartbeat('hb-alive'), { agentId: 'hb-alive' });
    await new Promise((r) => setTimeout(r, 150));
  }
  const agents = (await req(AGENT_SUBJECTS.list, {})).agents as any[];
  expect(agents.find((a) => a.agentId === 'hb-alive').state).toBe('ready');
  expect(agents.find((a) => a.agentId === 'hb-dead').state).toBe('lost');
  const unknown = await req(AGENT_SUBJECTS.heartbeat('never-registered'), { agentId: 'never-registered' });
  expect(unknown).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
}, 30000);

it('an agent is who its subject says: a body naming another agent is refused FORBIDDEN and changes nothing', async () => {
  await req(AGENT_SUBJECTS.register('id-victim'), registration('id-victim'));
  const list = async () =>
    ((await req(AGENT_SUBJECTS.list, {})).agents as Array<{ agentId: string; state: string }>).map((a) => `${a.agentId}:${a.state}`).sort();
  const before = await list();
  const forbidden = { ok: false, error: { code: 'FORBIDDEN', message: expect.stringMatching(/id-victim.*id-mallory/) } };
  expect(await req(AGENT_SUBJECTS.deregister('id-mallory'), { agentId: 'id-victim' })).toMatchObject(forbidden);
  expect(await req(AGENT_SUBJECTS.heartbeat('id-mallory'), { agentId: 'id-victim', busy: true })).toMatchObject(forbidden);
  expect(await req(AGENT_SUBJECTS.register('id-mallory'), registration('id-victim'))).toMatchObject(forbidden);
  expect(await req(AGENT_SUBJECTS.register('id-mallory'), registration('id-9'))).toMatchObject({ ok: false, error: { code: 'FORBIDDEN' } });
  expect(await list()).toEqual(before);
});

it('malformed and out-of-order messages get an error reply that names the problem and change nothing', async () => {
  const before = (await req(AGENT_SUBJECTS.list, {})).agents.length;
  expect(await req(AGENT_SUBJECTS.register('x'), '{not json')).toMatchObject({
    ok: false,
    error: { code: 'BAD_REQUEST', message: expect.stringMatching(/not valid JSON/) },
  });
  const bad = await req(AGENT_SUBJECTS.register('x'), { ...registration('x'), protocolVersion: 'one', agentId: 'bad id!' });
  expect(bad.ok).toBe(false);
  expect(bad.error.issues.join('\n')).toMatch(/protocolVersion/);
  expect(bad.error.issues.join('\n')).toMatch(/agentId/);
  expect(await req(RDZV_SUBJECTS.join, { runId: 'r', nodeId: 'n', minNodes: 3, maxNodes: 2 })).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
  expect(await req(RDZV_SUBJECTS.join, { runId: 'r16', nodeId: 'z', minNodes: 1, maxNodes: 2 })).toMatchObject({
    ok: false,
    error: { code: 'CONFLICT', message: expect.stringMatching(/16:16/) },
  });
  expect(await req(GROUP_SUBJECTS.create, { members: ['nobody'] })).toMatchObject({ ok: false, error: { message: 'unknown agents: nobody' } });
  expect(await req(RDZV_SUBJECTS.get, { runId: 'nope' })).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
  expect((await req(AGENT_SUBJECTS.list, {})).agents.length).toBe(before);
  const res = await fetch(`${coord!.url}/groups`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ members: [] }) });
  expect(res.status).toBe(400);
});

it('two replicas run at once and only one leads', async () => {
  const second = await startCoordinatorProcess(nats.url, { CMESH_HEARTBEAT_MS: '200', CMESH_LEASE_MS: '600' });
  try {
    await new Promise((r) => setTimeout(r, 800));
    const h = await Promise.all([coord!, second].map(async (c) => ((await (await fetch(`${c.url}/health`)).json()) as any).info.nats.leader));
    expect(h.filter(Boolean)).toHaveLength(1);
    // either replica serves requests
    expect(((await (await fetch(`${second.url}/agents`)).json()) as any).agents.length).toBeGreaterThan(0);
  } finally {
    await second.stop();
  }
}, 40000);

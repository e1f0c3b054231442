// The permissions natsAuthorization() gives each role, against a real nats-server configured with
// them: anonymous connections are refused; an agent reaches its coordinator requests, its own
// events and the job broadcasts but cannot publish a coordinator control subject, read another
// agent's events or write the coordinator's buckets; a client reaches the client API only.
import { connect, NatsConnection, StringCodec } from 'nats';
import { clusterNames, natsAuthorization, NatsUser } from '../src';
import { NatsServer, startNatsServer } from '@cmesh/testing';

const sc = StringCodec();
const n = clusterNames();
const users: NatsUser[] = [
  { user: 'coordinator', password: 'c'.repeat(24), role: 'coordinator' },
  { user: 'agent-0', password: 'a'.repeat(24), role: 'agent' },
  { user: 'agent-1', password: 'b'.repeat(24), role: 'agent' },
  { user: 'client', password: 'd'.repeat(24), role: 'client' },
];
let server: NatsServer;
const open: NatsConnection[] = [];

async function login(user: string): Promise<{ nc: NatsConnection; violations: string[] }> {
  const u = users.find((x) => x.user === user)!;
  const nc = await connect({ servers: server.url, user, pass: u.password as string });
  open.push(nc);
  const violations: string[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === 'error') violations.push(String(s.data));
  })();
  return { nc, violations };
}

/** Publishes and waits for the server's verdict (a violation arrives asynchronously, before the flush's PONG). */
async function publishSeen(c: { nc: NatsConnection; violations: string[] }, subject: string): Promise<boolean> {
  const before = c.violations.length;
  c.nc.publish(subject, sc.encode('x'));
  await c.nc.flush();
  await new Promise((r) => setTimeout(r, 100));
  return c.violations.length > before;
}

/** Whether a subscription on `subject` is refused. */
async function subscribeRefused(nc: NatsConnection, subject: string): Promise<boolean> {
  const sub = nc.subscribe(subject);
  let refused = false;
  const done = (async () => {
    try {
      for await (const _ of sub) break;
    } catch (e) {
      refused = /Permissions Violation/.test((e as Error).message);
    }
  })();
  await nc.flush();
  await new Promise((r) => setTimeout(r, 200));
  sub.unsubscribe();
  await done;
  return refused;
}

beforeAll(async () => {
  server = await startNatsServer({ config: natsAuthorization(users, n) });
}, 30_000);

afterAll(async () => {
  for (const nc of open) await nc.close().catch(() => undefined);
  await server?.stop();
});

it('refuses anonymous connections and wrong passwords', async () => {
  await expect(connect({ servers: server.url })).rejects.toMatchObject({ code: 'AUTHORIZATION_VIOLATION' });
  await expect(connect({ servers: server.url, user: 'agent-0', pass: 'wrong-password-000000' })).rejects.toMatchObject({ code: 'AUTHORIZATION_VIOLATION' });
});

it('an agent cannot publish on a coordinator control subject, nor write the coordinator\'s buckets', async () => {
  const agent = await login('agent-0');
  for (const subject of [n.jobs.start, n.jobs.cancel, n.agents.events('agent-1'), n.jobs.updates('j1'), n.jobs.submit, `$KV.${n.buckets.state}.agents.agent-1`, `$KV.${n.buckets.claims}.agent-1`, `$JS.API.STREAM.DELETE.KV_${n.buckets.jobs}`]) {
    expect([subject, await publishSeen(agent, subject)]).toEqual([subject, true]);
  }
  expect(agent.violations.every((v) => /PERMISSIONS_VIOLATION/.test(v))).toBe(true);
  expect(await subscribeRefused(agent.nc, n.agents.events('agent-1'))).toBe(true);
  expect(await subscribeRefused(agent.nc, n.jobs.eventsWildcard)).toBe(true);
  // what it needs is allowed
  for (const subject of [n.agents.heartbeat, n.jobs.events('j1')]) expect([subject, await publishSeen(agent, subject)]).toEqual([subject, false]);
  expect(await subscribeRefused(agent.nc, n.agents.events('agent-0'))).toBe(false);
});

it('each role reaches what it serves: the coordinator answers an agent\'s register and a client\'s submit, and its job broadcast reaches the agent', async () => {
  const coord = await login('coordinator');
  const agent = await login('agent-1');
  const client = await login('client');
  for (const subject of [n.agents.register, n.jobs.submit]) coord.nc.subscribe(subject, { callback: (_e, m) => m.respond(sc.encode(`ok ${m.subject}`)) });
  const starts = agent.nc.subscribe(n.jobs.start, { max: 1 });
  await coord.nc.flush();
  await agent.nc.flush();
  expect(sc.decode((await agent.nc.request(n.agents.register, sc.encode('{}'), { timeout: 5000 })).data)).toBe(`ok ${n.agents.register}`);
  expect(sc.decode((await client.nc.request(n.jobs.submit, sc.encode('{}'), { timeout: 5000 })).data)).toBe(`ok ${n.jobs.submit}`);
  coord.nc.publish(n.jobs.start, sc.encode('assignment'));
  for await (const m of starts) expect(sc.decode(m.data)).toBe('assignment');
  // a client is no agent and no coordinator
  for (const subject of [n.agents.register, n.jobs.start, n.jobs.events('j1')]) expect([subject, await publishSeen(client, subject)]).toEqual([subject, true]);
  expect(await subscribeRefused(client.nc, n.jobs.start)).toBe(true);
  expect(coord.violations).toEqual([]);
});

it("a service group's member worker (an agent login) answers the coordinator's status request", async () => {
  const coord = await login('coordinator');
  const agent = await login('agent-0');
  agent.nc.subscribe(n.svc.status('grads_1'), { callback: (_e, m) => m.respond(sc.encode('{"rank":0}')) });
  await agent.nc.flush();
  expect(sc.decode((await coord.nc.request(n.svc.status('grads_1'), sc.encode('{}'), { timeout: 5000 })).data)).toBe('{"rank":0}');
  expect([coord.violations, agent.violations]).toEqual([[], []]);
});

it('agents and clients use store buckets (the jobs\' and their own) through JetStream', async () => {
  const agent = await login('agent-0');
  const kv = await agent.nc.jetstream().views.kv('cmesh_store_jobs-j1');
  await kv.put('k', 'v');
  expect(sc.decode((await kv.get('k'))!.value)).toBe('v');
  expect(agent.violations).toEqual([]);
});

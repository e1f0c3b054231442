// The permissions natsAuthorization() gives each login, line by line of docs/operations.md's
// permission table, against a real nats-server configured with them: anonymous connections are
// refused; an agent reaches its own coordinator requests, events and assignments but cannot
// publish a coordinator control subject, speak as another agent, read another agent's events or
// assignments, or touch the coordinator's buckets; a client reaches the client API only; nobody
// but the coordinator makes, changes, lists or deletes a stream; each login reads only its own
// inboxes.
import { connect } from '@nats-io/transport-node';
import { AuthorizationError, NatsConnection } from '@nats-io/nats-core';
import { AckPolicy, DeliverPolicy, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { clusterNames, deploymentNatsUsers, natsAuthorization, NatsUser } from '../src';
import { NatsServer, startNatsServer } from '@cmesh/testing';

const n = clusterNames();
const users: NatsUser[] = deploymentNatsUsers(['agent-0', 'agent-1'], ['team-b'], (u) => `${u}-password-0123456789`);
let server: NatsServer;
const open: NatsConnection[] = [];

async function login(user: string): Promise<{ nc: NatsConnection; violations: string[] }> {
  const u = users.find((x) => x.user === user)!;
  const nc = await connect({ servers: server.url, user, pass: u.password as string, inboxPrefix: `_INBOX.${user}` });
  open.push(nc);
  const violations: string[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === 'error') violations.push(`${s.error.name}: ${s.error.message}`);
  })();
  return { nc, violations };
}

/** Publishes and waits for the server's verdict (a violation arrives asynchronously, before the flush's PONG). */
async function publishSeen(c: { nc: NatsConnection; violations: string[] }, subject: string): Promise<boolean> {
  const before = c.violations.length;
  c.nc.publish(subject, 'x');
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
  await expect(connect({ servers: server.url })).rejects.toThrow(AuthorizationError);
  await expect(connect({ servers: server.url, user: 'agent-0', pass: 'wrong-password-000000' })).rejects.toThrow(AuthorizationError);
});

it("an agent cannot publish on a coordinator control subject, speak as another agent, nor touch the coordinator's buckets", async () => {
  const agent = await login('agent-0');
  const forbidden = [
    n.jobs.start('agent-0'),
    n.jobs.cancel,
    n.agents.events('agent-1'),
    n.jobs.updates('j1'),
    n.jobs.submit,
    // another agent's identity
    n.agents.register('agent-1'),
    n.agents.heartbeat('agent-1'),
    n.agents.deregister('agent-1'),
    n.jobs.events('j1', 'agent-1'),
    // the coordinator's buckets: write, read, watch, delete
    `$KV.${n.buckets.state}.agents.agent-1`,
    `$KV.${n.buckets.claims}.agent-1`,
    `$JS.API.DIRECT.GET.KV_${n.buckets.state}`,
    `$JS.API.STREAM.MSG.GET.KV_${n.buckets.jobs}`,
    `$JS.API.CONSUMER.CREATE.KV_${n.buckets.state}`,
    `$JS.API.STREAM.DELETE.KV_${n.buckets.jobs}`,
    // any stream: make, change, list, delete, purge
    '$JS.API.STREAM.CREATE.evil',
    '$JS.API.STREAM.UPDATE.KV_cmesh_store_jobs_j1-x',
    '$JS.API.STREAM.LIST',
    '$JS.API.STREAM.NAMES',
    '$JS.API.STREAM.DELETE.KV_cmesh_store_jobs_j1-x',
    '$JS.API.STREAM.PURGE.KV_cmesh_store_jobs_j1-x',
    '$JS.API.CONSUMER.DURABLE.CREATE.KV_cmesh_store_jobs_j1-x.d',
  ];
  for (const subject of forbidden) expect([subject, await publishSeen(agent, subject)]).toEqual([subject, true]);
  expect(agent.violations.every((v) => /^PermissionViolationError: Permissions Violation for Publish to /.test(v))).toBe(true);
  for (const subject of [n.agents.events('agent-1'), n.jobs.start('agent-1'), n.jobs.eventsWildcard, '_INBOX.>', '_INBOX.agent-1.>', `$KV.>`, '$JS.EVENT.>']) {
    expect([subject, await subscribeRefused(agent.nc, subject)]).toEqual([subject, true]);
  }
  // what it needs is allowed
  for (const subject of [n.agents.heartbeat('agent-0'), n.jobs.events('j1', 'agent-0')])
    expect([subject, await publishSeen(agent, subject)]).toEqual([subject, false]);
  for (const subject of [n.agents.events('agent-0'), n.jobs.start('agent-0'), n.jobs.cancel, '_INBOX.agent-0.x'])
    expect([subject, await subscribeRefused(agent.nc, subject)]).toEqual([subject, false]);
});

it("each role reaches what it serves: the coordinator answers an agent's register and a client's submit, and its assignment reaches that agent only", async () => {
  const coord = await login('coordinator');
  const agent = await login('agent-1');
  const client = await login('client');
  for (const subject of [n.agents.registerWildcard, n.jobs.submit])
    coord.nc.subscribe(subject, {
      callback: (_e, m) => {
        m.respond(`ok ${m.subject}`);
      },
    });
  const starts = agent.nc.subscribe(n.jobs.start('agent-1'), { max: 1 });
  await coord.nc.flush();
  await agent.nc.flush();
  expect((await agent.nc.request(n.agents.register('agent-1'), '{}', { timeout: 5000 })).string()).toBe(`ok ${n.agents.register('agent-1')}`);
  expect((await client.nc.request(n.jobs.submit, '{}', { timeout: 5000 })).string()).toBe(`ok ${n.jobs.submit}`);
  coord.nc.publish(n.jobs.start('agent-1'), 'assignment');
  for await (const m of starts) expect(m.string()).toBe('assignment');
  // a client is no agent and no coordinator
  for (const subject of [n.agents.register('agent-1'), n.jobs.start('agent-1'), n.jobs.events('j1', 'agent-1'), n.stores.open.replace('open', 'nope')])
    expect([subject, await publishSeen(client, subject)]).toEqual([subject, true]);
  for (const subject of [n.jobs.start('agent-1'), n.agents.events('agent-1'), n.serviceGroups.join, n.jobs.submit])
    expect([subject, await subscribeRefused(client.nc, subject)]).toEqual([subject, true]);
  expect(coord.violations).toEqual([]);
});

it("a tenant reads only its own inbox: another login's replies never reach it", async () => {
  const coord = await login('coordinator');
  const client = await login('client');
  const other = await login('team-b');
  coord.nc.subscribe(n.jobs.get, {
    callback: (_e, m) => {
      m.respond(`for ${m.reply}`);
    },
  });
  await coord.nc.flush();
  expect(await subscribeRefused(other.nc, '_INBOX.>')).toBe(true);
  expect(await subscribeRefused(other.nc, '_INBOX.client.>')).toBe(true);
  expect((await client.nc.request(n.jobs.get, '{}', { timeout: 5000 })).string()).toMatch(/^for _INBOX\.client\./);
  expect((await other.nc.request(n.jobs.get, '{}', { timeout: 5000 })).string()).toMatch(/^for _INBOX\.team-b\./);
});

it("a service group's member worker (an agent login) answers the coordinator's status request", async () => {
  const coord = await login('coordinator');
  const agent = await login('agent-0');
  agent.nc.subscribe(n.serviceGroups.status('grads_1'), {
    callback: (_e, m) => {
      m.respond('{"rank":0}');
    },
  });
  await agent.nc.flush();
  expect((await coord.nc.request(n.serviceGroups.status('grads_1'), '{}', { timeout: 5000 })).string()).toBe('{"rank":0}');
  expect([coord.violations, agent.violations]).toEqual([[], []]);
});

it('agents and clients use a store bucket the coordinator made, by its name, but cannot make, list, purge or delete one', async () => {
  const coord = await login('coordinator');
  const bucket = n.stores.bucket('jobs', 'j1-0123456789abcdef');
  await new Kvm(coord.nc).create(bucket, { history: 1 });
  for (const user of ['agent-0', 'client']) {
    const c = await login(user);
    const kv = await new Kvm(c.nc).open(bucket, { bindOnly: true });
    await kv.put(`k-${user}`, 'v');
    expect((await kv.get(`k-${user}`))!.string()).toBe('v');
    const keys: string[] = [];
    for await (const k of await kv.keys()) keys.push(k);
    expect(keys).toContain(`k-${user}`);
    expect(c.violations).toEqual([]);
    const jsm = await jetstreamManager(c.nc, { checkAPI: false });
    await expect(jsm.streams.add({ name: 'evil', subjects: [n.jobs.start('agent-0')] })).rejects.toThrow(/Permissions Violation/);
    await expect(
      jsm.streams.add({ name: 'evil2', subjects: ['evil.>'], republish: { src: '>', dest: `$KV.${n.buckets.state}.agents.agent-9` } }),
    ).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.delete(`KV_${bucket}`)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.purge(`KV_${bucket}`)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.names().next()).rejects.toThrow(/Permissions Violation/);
    await expect(new Kvm(c.nc).create('cmesh_store_mine', { history: 1 })).rejects.toThrow(/Permissions Violation/);
  }
});

it("a consumer can still be made to deliver a store bucket's bytes to any subject: the receiver sees the stream's subject (what Inbound refuses)", async () => {
  const coord = await login('coordinator');
  const agent = await login('agent-0');
  const client = await login('client');
  const bucket = n.stores.bucket('jobs', 'j2-0123456789abcdef');
  await new Kvm(coord.nc).create(bucket, { history: 1 });
  const kv = await new Kvm(client.nc).open(bucket, { bindOnly: true });
  await kv.put('forged', '{"jobId":"evil"}');
  const got: string[] = [];
  agent.nc.subscribe(n.jobs.start('agent-0'), {
    callback: (_e, m) => {
      got.push(m.subject);
    },
  });
  await agent.nc.flush();
  const jsm = await jetstreamManager(client.nc, { checkAPI: false });
  await jsm.consumers.add(`KV_${bucket}`, { deliver_subject: n.jobs.start('agent-0'), ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
  const deadline = Date.now() + 5000;
  while (!got.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(got).toEqual([`$KV.${bucket}.forged`]);
});

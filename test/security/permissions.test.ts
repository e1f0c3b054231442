// Tried as a hostile tenant and a hostile agent would, against a mesh with authentication on (what
// `cmesh up` runs, with a second tenant): every attempt on another login's job, identity or
// messages fails with a permission error or a typed refusal, and the victim's job, running all the
// while, succeeds with every element checked (#wrong 0).
//
// - a client makes a stream capturing an agent's assignments, one republishing into the
//   coordinator's state bucket, one answering job submissions with PubAcks, lists the streams to
//   find the victim's store bucket, deletes or purges a bucket: permission violations;
// - a client makes a consumer on a store bucket it knows deliver forged assignments to an agent's
//   subject: the agent refuses them (not_published) and starts no job;
// - agent-0's login deregisters agent-1, registers a made-up agent-9, reports events for the
//   victim's job as agent-1, beats for agent-1: violations; a body naming agent-1 on agent-0's own
//   subject: FORBIDDEN, refused;
// - another tenant reads the replies of the client login (its inbox): refused.
import { mkdtempSync, rmSync } from 'fs';
import { NatsConnection } from '@nats-io/nats-core';
import { AckPolicy, DeliverPolicy, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { tmpdir } from 'os';
import { join } from 'path';
import { clusterNames, JobRecord, PROTOCOL_VERSION } from '@cmesh/protocol';
import { rejectedMessages } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { statePassword, TestLogins } from './support/logins';

const n = clusterNames();
const TENANT = 'team-b';

describe('every login can do only its own job', () => {
  let mesh: Mesh;
  let stateDir: string;

  const logins = new TestLogins(
    () => mesh.natsUrl,
    statePassword(() => stateDir),
  );
  const login = (user: string) => logins.login(user);

  /** Publishes and waits for the server's verdict (a violation arrives before the flush's PONG). */
  async function refused(c: { nc: NatsConnection; violations: string[] }, subject: string, body: unknown = {}): Promise<boolean> {
    const before = c.violations.length;
    c.nc.publish(subject, JSON.stringify(body));
    await c.nc.flush();
    await new Promise((r) => setTimeout(r, 100));
    return c.violations.length > before;
  }

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-sec-perm-'));
    mesh = await startMesh({ agents: 2, port: 0, auth: { stateDir, tenants: [TENANT] }, write: () => undefined, readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    await logins.closeAll();
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("attacks on the control plane fail while the victim's job runs to a correct end", async () => {
    const victim = await mesh.client.submitJob({ op: 'allReduce', sizes: [4096, 1 << 20], iters: 40, warmup: 2, check: true, nranks: 2 });
    const client = await login('client');
    const agent0 = await login('agent-0');
    const other = await login(TENANT);
    const jsm = await jetstreamManager(client.nc, { checkAPI: false });

    // JetStream: no stream of a client's, so nothing captures, republishes or answers for the coordinator
    await expect(jsm.streams.add({ name: 'capture', subjects: [n.jobs.start('agent-0')] })).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.add({ name: 'answer', subjects: [n.jobs.submit, n.serviceGroups.join] })).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.add({ name: 'repub', subjects: ['x.>'], republish: { src: '>', dest: `$KV.${n.buckets.state}.agents.agent-9` } })).rejects.toThrow(
      /Permissions Violation/,
    );
    await expect(jsm.streams.names().next()).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.delete(`KV_${n.buckets.jobs}`)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.purge(`KV_${n.buckets.state}`)).rejects.toThrow(/Permissions Violation/);
    await expect(new Kvm(client.nc).open(n.buckets.state, { bindOnly: true }).then((kv) => kv.get('agents.agent-0'))).rejects.toThrow(/Permissions Violation/);
    // a job's record names no store bucket and no secret
    const rec = JSON.stringify(await mesh.client.job(victim.id));
    expect(rec).not.toMatch(/cmesh_store|secret/);

    // an agent's login speaks only for itself
    expect(await refused(agent0, n.agents.deregister('agent-1'), { agentId: 'agent-1' })).toBe(true);
    expect(await refused(agent0, n.agents.register('agent-9'), { agentId: 'agent-9' })).toBe(true);
    expect(await refused(agent0, n.agents.heartbeat('agent-1'), { agentId: 'agent-1', busy: false })).toBe(true);
    expect(await refused(agent0, n.jobs.events(victim.id, 'agent-1'), { jobId: victim.id, agentId: 'agent-1', rank: 1, type: 'done' })).toBe(true);
    expect(await refused(agent0, n.jobs.start('agent-1'))).toBe(true);
    const forbidden = (await agent0.nc.request(n.agents.deregister('agent-0'), JSON.stringify({ agentId: 'agent-1' }), { timeout: 5000 })).json();
    expect(forbidden).toMatchObject({ ok: false, error: { code: 'FORBIDDEN' } });
    const reg = {
      protocolVersion: PROTOCOL_VERSION,
      agentId: 'agent-9',
      name: 'agent-9',
      host: '127.0.0.1',
      device: { kind: 'cpu', index: 0 },
      backends: [{ name: 'tcp', available: true }],
      dataPlane: { host: '127.0.0.1' },
    };
    expect((await agent0.nc.request(n.agents.register('agent-0'), JSON.stringify(reg), { timeout: 5000 })).json()).toMatchObject({
      ok: false,
      error: { code: 'FORBIDDEN' },
    });
    // the agent's events forged on its own subject for the other rank: refused, counted
    const eventsRefused = await rejectedMessages(`${mesh.coordinatorUrl}/metrics`, n.jobs.eventsWildcard);
    agent0.nc.publish(
      n.jobs.events(victim.id, 'agent-0'),
      JSON.stringify({ jobId: victim.id, agentId: 'agent-1', rank: 1, type: 'failed', error: { name: 'Forged', message: 'forged' } }),
    );
    await agent0.nc.flush();

    // another tenant cannot read the client's replies
    const sniff = other.nc.subscribe('_INBOX.client.>');
    await expect(
      (async () => {
        for await (const _ of sniff) return 'read a reply';
      })(),
    ).rejects.toThrow(/Permissions Violation for Subscription to "_INBOX\.client\.>"/);

    // a consumer on a store bucket the attacker knows (one it was given: a coordinator-made one)
    // delivering forged assignments to agent-1's subject: refused by the agent, no job starts there
    const coordinator = await login('coordinator');
    const bucket = n.stores.bucket('jobs', 'forged-0123456789abcdef');
    await new Kvm(coordinator.nc).create(bucket, { history: 1 });
    const kv = await new Kvm(client.nc).open(bucket, { bindOnly: true });
    const forgedAssignment = {
      jobId: 'jforged',
      sweep: victim.sweep,
      members: [{ agentId: 'agent-1', name: 'agent-1', rank: 0 }],
      storePrefix: bucket,
      secret: 'forged-secret-0123456789',
    };
    await kv.put('a', JSON.stringify(forgedAssignment));
    const agentMetrics = `${(await mesh.client.get<{ agents: { agentId: string; httpUrl: string }[] }>('/agents')).agents.find((a) => a.agentId === 'agent-1')!.httpUrl}/metrics`;
    await jsm.consumers.add(`KV_${bucket}`, { deliver_subject: n.jobs.start('agent-1'), ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
    const deadline = Date.now() + 10_000;
    while ((await rejectedMessages(agentMetrics, n.jobs.start('agent-1'))) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await rejectedMessages(agentMetrics, n.jobs.start('agent-1'))).toBeGreaterThanOrEqual(1);

    // the victim's job finished, correct in every element, with both agents; nothing forged counted
    const done: JobRecord = await mesh.client.waitJob(victim.id, undefined, { timeoutMs: 120_000 });
    expect([done.state, done.reason]).toEqual(['succeeded', undefined]);
    expect(done.rows.length).toBe(2);
    // #wrong: every element of both modes of both sizes checked on every rank
    expect(done.rows.flatMap((r) => [r.outOfPlace?.wrong, r.inPlace?.wrong])).toEqual([0, 0, 0, 0]);
    expect(await rejectedMessages(`${mesh.coordinatorUrl}/metrics`, n.jobs.eventsWildcard)).toBeGreaterThan(eventsRefused);
    // both agents are still registered, neither lost nor deregistered (ready at their next heartbeat)
    const agents = async () =>
      (await mesh.client.get<{ agents: { agentId: string; state: string }[] }>('/agents')).agents.map((a) => `${a.agentId}:${a.state}`).sort();
    for (const end = Date.now() + 10_000; (await agents()).some((a) => !a.endsWith(':ready')) && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 200));
    expect(await agents()).toEqual(['agent-0:ready', 'agent-1:ready']);
    expect((await mesh.client.jobs(20)).map((j) => j.id)).not.toContain('jforged');
  }, 180_000);
});

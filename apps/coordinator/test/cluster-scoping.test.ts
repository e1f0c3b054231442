// Two clusters on ONE nats-server: the default cluster and `lab`, each with its own coordinator
// and two rank agents of the same names (agent-0, agent-1, so every agent id and claim key exists
// twice). Neither cluster sees the other's agents, groups, rendezvous rounds, jobs or claims: a
// job submitted in each at once (onBusy: refuse) completes on that cluster's agents only, and each
// listing shows only its own. Before subjects and buckets carried the cluster, both coordinators
// answered the same subjects, agents registered with either, and the second job was refused.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { JobRecord, clusterNames } from '@cmesh/protocol';
import { NatsServer, startNatsServer, isAlive as alive } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { KvStream } from '../src/state/kv-keys';

interface AgentRec {
  agentId: string;
  name: string;
  pid: number;
  httpUrl: string;
}

describe('two clusters on one nats-server', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  const meshes: Record<'default' | 'lab', Mesh | undefined> = { default: undefined, lab: undefined };
  const lines: string[] = [];
  const write = (l: string) => {
    lines.push(l);
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    // one after the other: the machine running the suite may be small
    meshes.default = await startMesh({ agents: 2, natsUrl: nats.url, port: 0, write, readyTimeoutMs: 90_000 });
    meshes.lab = await startMesh({ agents: 2, natsUrl: nats.url, port: 0, cluster: 'lab', write, readyTimeoutMs: 90_000 });
  }, 200_000);

  afterAll(async () => {
    const pids = [...(meshes.default?.supervisor.pids() ?? []), ...(meshes.lab?.supervisor.pids() ?? [])];
    await meshes.default?.stop();
    await meshes.lab?.stop();
    await nc?.close();
    await nats?.stop();
    expect(pids.filter(alive)).toEqual([]);
  }, 60_000);

  const mesh = (c: 'default' | 'lab') => meshes[c]!;
  const agents = async (c: 'default' | 'lab') => (await mesh(c).client.get<{ agents: AgentRec[] }>('/agents')).agents;
  /** the pids of the agents this cluster's mesh started (its supervisor's children, less the coordinator) */
  const ownAgentPids = async (c: 'default' | 'lab') => {
    const pids = new Set(mesh(c).supervisor.pids());
    const recs = await agents(c);
    for (const a of recs) expect(pids.has(a.pid)).toBe(true);
    return recs.map((a) => a.pid).sort();
  };
  const post = async <T>(c: 'default' | 'lab', path: string, body: unknown): Promise<T> => {
    const r = await fetch(`${mesh(c).coordinatorUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(r.status).toBeLessThan(300);
    return (await r.json()) as T;
  };

  it("each coordinator lists exactly its own two agents (same names, the other cluster's pids never)", async () => {
    const d = await agents('default');
    const l = await agents('lab');
    expect(d.map((a) => a.name).sort()).toEqual(['agent-0', 'agent-1']);
    expect(l.map((a) => a.name).sort()).toEqual(['agent-0', 'agent-1']);
    const dp = await ownAgentPids('default');
    const lp = await ownAgentPids('lab');
    expect(dp).toHaveLength(2);
    expect(lp).toHaveLength(2);
    expect(dp.filter((p) => lp.includes(p))).toEqual([]);
  });

  it('a group created in one cluster is told to its own members only', async () => {
    // default: one group; lab: two, in the other rank order
    const g = await post<{ id: string }>('default', '/groups', { members: ['agent-0', 'agent-1'] });
    const l1 = await post<{ id: string }>('lab', '/groups', { members: ['agent-1', 'agent-0'] });
    const l2 = await post<{ id: string }>('lab', '/groups', { members: ['agent-1', 'agent-0'] });
    expect(g.id).toBe('1');
    expect([l1.id, l2.id]).toEqual(['1', '2']);
    expect((await mesh('default').client.get<{ groups: { id: string }[] }>('/groups')).groups.map((x) => x.id)).toEqual(['1']);
    expect((await mesh('lab').client.get<{ groups: { id: string }[] }>('/groups')).groups.map((x) => x.id).sort()).toEqual(['1', '2']);
    const groupsOf = async (c: 'default' | 'lab', name: string) => {
      const a = (await agents(c)).find((x) => x.name === name)!;
      // the notification is a NATS event: give it a moment to arrive (and a wrong one to arrive too)
      await new Promise((r) => setTimeout(r, 300));
      const h = (await (await fetch(`${a.httpUrl}/health`)).json()) as { groups: { groupId: string; rank: number; size: number }[] };
      return h.groups.map((x) => ({ groupId: x.groupId, rank: x.rank, size: x.size })).sort((x, y) => x.groupId.localeCompare(y.groupId));
    };
    expect(await groupsOf('default', 'agent-0')).toEqual([{ groupId: '1', rank: 0, size: 2 }]);
    expect(await groupsOf('default', 'agent-1')).toEqual([{ groupId: '1', rank: 1, size: 2 }]);
    expect(await groupsOf('lab', 'agent-0')).toEqual([
      { groupId: '1', rank: 1, size: 2 },
      { groupId: '2', rank: 1, size: 2 },
    ]);
    expect(await groupsOf('lab', 'agent-1')).toEqual([
      { groupId: '1', rank: 0, size: 2 },
      { groupId: '2', rank: 0, size: 2 },
    ]);
  });

  it("a rendezvous round in one cluster is not the other's", async () => {
    await post('lab', '/rendezvous/r1/join', { nodeId: 'n1', minNodes: 2, maxNodes: 2 });
    const other = await fetch(`${mesh('default').coordinatorUrl}/rendezvous/r1`);
    expect(other.status).toBe(404);
    const mine = await fetch(`${mesh('lab').coordinatorUrl}/rendezvous/r1`);
    expect(mine.status).toBe(200);
  });

  it("a job submitted in each at once runs on that cluster's agents only; each lists only its own", async () => {
    const req = {
      op: 'allReduce' as const,
      sizes: Array.from({ length: 30 }, () => 1 << 20),
      iters: 10,
      warmup: 1,
      agents: ['agent-0', 'agent-1'],
      onBusy: 'refuse' as const,
    };
    // both claim "agent-0" and "agent-1" at the same time: a shared claims bucket would refuse one
    const [jd, jl] = await Promise.all([mesh('default').client.submitJob(req), mesh('lab').client.submitJob(req)]);
    expect(jd.state).toBe('running');
    expect(jl.state).toBe('running');
    // while both run (they were claimed before the replies; the workers' start-up alone outlasts
    // these reads), each cluster's claims bucket holds its own job on both agents
    const claims = async (bucket: string) => {
      const kv = await new Kvm(nc).create(bucket);
      const out: Record<string, string> = {};
      for (const agent of ['agent-0', 'agent-1']) {
        const e = await kv.get(agent);
        if (e?.operation === 'PUT' && e.value.length) out[agent] = (JSON.parse(e.string()) as { jobId: string }).jobId;
      }
      return out;
    };
    expect(await claims(clusterNames().buckets.claims)).toEqual({ 'agent-0': jd.id, 'agent-1': jd.id });
    expect(await claims(clusterNames('lab').buckets.claims)).toEqual({ 'agent-0': jl.id, 'agent-1': jl.id });
    const [rd, rl] = await Promise.all([
      mesh('default').client.waitJob(jd.id, undefined, { timeoutMs: 60_000 }),
      mesh('lab').client.waitJob(jl.id, undefined, { timeoutMs: 60_000 }),
    ]);
    const check = async (c: 'default' | 'lab', rec: JobRecord) => {
      expect(rec.state).toBe('succeeded');
      expect(rec.rows).toHaveLength(30);
      for (const r of rec.rows) expect(r.outOfPlace?.wrong ?? 0).toBe(0);
      expect(rec.members.map((m) => m.pid).sort()).toEqual(await ownAgentPids(c));
    };
    await check('default', rd);
    await check('lab', rl);
    expect((await mesh('default').client.jobs(50)).map((j) => j.id)).toEqual([jd.id]);
    expect((await mesh('lab').client.jobs(50)).map((j) => j.id)).toEqual([jl.id]);
    expect((await fetch(`${mesh('default').coordinatorUrl}/jobs/${jl.id}`)).status).toBe(404);
    expect((await fetch(`${mesh('lab').coordinatorUrl}/jobs/${jd.id}`)).status).toBe(404);
    // every bucket of each cluster exists under its own name
    const jsm = await jetstreamManager(nc);
    const streams: string[] = [];
    for await (const si of jsm.streams.list()) streams.push(si.config.name);
    for (const c of ['default', 'lab']) for (const b of Object.values(clusterNames(c).buckets)) expect(streams).toContain(`KV_${b}`);
    const jobKeys = async (bucket: string) => new KvStream(jsm, bucket).keys();
    expect(await jobKeys(clusterNames().buckets.jobs)).toEqual([jd.id]);
    expect(await jobKeys(clusterNames('lab').buckets.jobs)).toEqual([jl.id]);
  }, 120_000);
});

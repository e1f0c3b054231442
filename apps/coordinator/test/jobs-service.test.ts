// The coordinator's jobs module against a real nats-server: the REST API, aggregation into
// nccl-tests rows, KV persistence, busy agents (queue / refuse), and blame when a member dies or
// reports a peer failure. The members here are scripted NATS clients speaking the job protocol
// (the real agents are exercised in apps/rank-agent/test/mesh-jobs.test.ts).
import 'reflect-metadata';
import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { Kvm } from '@nats-io/kv';
import { busBwFactor } from '@cmesh/bench';
import { ErrorReplySchema, clusterNames, JOB_MAX_ITERS, JOB_PING_INTERVAL_MS, JOB_SUBJECTS, JobAssignment, JobRecord } from '@cmesh/protocol';
import { AgentDirectory, AgentView } from '../src/jobs/agent-directory';
import { JobsModule, JobsModuleOptions } from '../src/jobs/jobs.module';
import { JOBS_NATS } from '../src/jobs/tokens';
import { HttpErrorFilter } from '../src/http/http-error.filter';
import { connectNatsControllers } from '../src/nats/nats-transport';
import { InboundTransport } from '@cmesh/protocol/nest';
import { JobStore } from '../src/jobs/job-store';
import { JobsService } from '../src/jobs/jobs.service';
import { claimRenewMs } from '../src/jobs/agent-claims';
import { NatsServer, startNatsServer } from '@cmesh/testing';

class FixedDirectory extends AgentDirectory {
  constructor(readonly list: AgentView[]) {
    super();
  }
  async agents() {
    return this.list;
  }
  async groupMembers(id: string) {
    return id === 'g1' ? ['a2', 'a0'] : null;
  }
}

type Behaviour = { dieAtSize?: number; skipSize?: number; failAtSize?: { peers?: number[]; code?: string; message: string } };

/** A scripted member: accepts, pings, sends one sample per size (time = bytes ns), then done. */
function scriptedAgent(nc: NatsConnection, agentId: string, behaviour: () => Behaviour) {
  const seen: JobAssignment[] = [];
  const cancelled = new Set<string>(); // like a real agent, a cancelled job's sweep stops
  nc.subscribe(JOB_SUBJECTS.cancel, {
    callback: (_e, msg) => {
      cancelled.add((msg.json() as { jobId: string }).jobId);
    },
  });
  nc.subscribe(JOB_SUBJECTS.start(agentId), {
    callback: (_e, msg) => {
      const a = msg.json() as JobAssignment;
      const me = a.members.find((m) => m.agentId === agentId);
      // like a real agent, a copy asking again starts nothing (this one keeps no events to send again)
      if (!me || a.again) return;
      seen.push(a);
      const b = behaviour();
      const emit = (ev: Record<string, unknown>) =>
        nc.publish(JOB_SUBJECTS.events(a.jobId, agentId), JSON.stringify({ jobId: a.jobId, agentId, rank: me.rank, ...ev }));
      emit({ type: 'accepted', pid: 1000 + me.rank, host: 'h', device: 'cpu' });
      const ping = setInterval(() => emit({ type: 'ping' }), JOB_PING_INTERVAL_MS);
      let i = 0;
      const step = () => {
        if (cancelled.has(a.jobId)) return clearInterval(ping);
        if (i === a.sweep.sizes.length) {
          clearInterval(ping);
          return emit({ type: 'done' });
        }
        const bytes = a.sweep.sizes[i];
        if (b.dieAtSize === i) return clearInterval(ping); // silent from here on
        if (b.failAtSize && i === 1) {
          clearInterval(ping);
          return emit({
            type: 'failed',
            error: { name: 'PeerFailureError', code: b.failAtSize.code ?? 'PEER_FAILURE', message: b.failAtSize.message, peers: b.failAtSize.peers },
          });
        }
        const t = (bytes * (1 + me.rank)) / 1e9; // rank r is (1+r)x slower
        if (b.skipSize === i) {
          // its samples never reach the coordinator (a refused publish), yet it carries on
          i++;
          return setTimeout(step, 20);
        }
        emit({
          type: 'size',
          samples: {
            requestedBytes: bytes,
            bytes,
            count: bytes / 4,
            variants: [{ mode: 'out-of-place', times: [t, 3 * t, 2 * t], wrong: me.rank === 1 && bytes === 64 ? 2 : 0 }],
          },
        });
        i++;
        setTimeout(step, 20);
      };
      setTimeout(step, 20);
    },
  });
  return seen;
}

/** A jobs module with its REST API and NATS controllers, as a coordinator replica runs them. */
/** Claims and leases here go stale in 4 s (the coordinator's claimStaleMs; 10 s by default): a dead replica's takeover takes seconds. */
const CLAIM_STALE_MS = 4000;
const CLAIM_RENEW_MS = claimRenewMs(CLAIM_STALE_MS);

async function startReplica(opts: JobsModuleOptions): Promise<{ app: INestApplication; transport: InboundTransport }> {
  const app = await NestFactory.create(JobsModule.forRoot({ claimStaleMs: CLAIM_STALE_MS, ...opts }), { logger: false });
  app.useGlobalFilters(new HttpErrorFilter()); // as startCoordinator registers it
  app.enableShutdownHooks();
  const transport = connectNatsControllers(app, JOBS_NATS);
  await app.init();
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  return { app, transport };
}

/** "Kills" a replica: no more ticks (renewals, queue draining) and no more NATS messages. */
function stopReplica(r: { app: INestApplication; transport: InboundTransport }): void {
  clearInterval((r.app.get(JobsService) as unknown as { timer: NodeJS.Timeout }).timer);
  r.transport.close();
}

describe('coordinator jobs (real nats-server)', () => {
  let nats: NatsServer;
  let app: INestApplication;
  let base: string;
  let nc: NatsConnection;
  const behaviours: Record<string, Behaviour> = {};
  const dir = new FixedDirectory(['a0', 'a1', 'a2', 'a3'].map((n) => ({ agentId: n, name: n, alive: true, host: '127.0.0.1' })));

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    for (const a of dir.list) scriptedAgent(nc, a.agentId, () => behaviours[a.agentId] ?? {});
    app = (await startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir } })).app;
    base = await app.getUrl();
  });

  afterAll(async () => {
    await app?.close();
    await nc?.close();
    await nats?.stop();
  });

  /** POST /jobs on this replica, or on the one at `url` */
  const post = async (body: unknown, url = base) => {
    const r = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as JobRecord & { code?: string; message?: string; issues?: string[] } };
  };
  const wait = async (id: string, ms = 10_000): Promise<JobRecord> => {
    const end = Date.now() + ms;
    for (;;) {
      const j = (await (await fetch(`${base}/jobs/${id}`)).json()) as JobRecord;
      if (['succeeded', 'failed', 'cancelled'].includes(j.state) || Date.now() > end) return j;
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  it("aggregates every member's samples into rows: slowest rank per iteration, median, wrong summed", async () => {
    const { status, body } = await post({ op: 'allReduce', sizes: [64, 4096], iters: 3, warmup: 0, nranks: 4 });
    expect(status).toBe(201);
    const job = await wait(body.id);
    expect(job.state).toBe('succeeded');
    expect(job.members.map((m) => [m.name, m.rank, m.pid])).toEqual([
      ['a0', 0, 1000],
      ['a1', 1, 1001],
      ['a2', 2, 1002],
      ['a3', 3, 1003],
    ]);
    expect(job.rows.map((r) => r.bytes)).toEqual([64, 4096]);
    for (const r of job.rows) {
      // slowest rank is rank 3 (4x): iterations 4t, 12t, 8t -> median 8t with t = bytes ns
      const us = (8 * r.bytes) / 1e3;
      expect(r.outOfPlace!.timeUs).toBeCloseTo(us, 6);
      expect(r.outOfPlace!.algBwGBs).toBeCloseTo(r.bytes / (us * 1e3), 9);
      expect(r.outOfPlace!.busBwGBs).toBeCloseTo(r.outOfPlace!.algBwGBs * busBwFactor('allReduce', 4), 9);
      expect(r.outOfPlace!.wrong).toBe(r.bytes === 64 ? 2 : 0);
      expect(r.inPlace).toBeNull();
      expect(r.nranks).toBe(4);
    }
    expect(job.progress).toEqual({ done: 2, total: 2 });
    // kept in KV: a fresh reader sees the finished record
    const store = new JobStore(nc, clusterNames().buckets.jobs);
    await store.open();
    // the record is written to KV just after the state changes in memory
    let stored = await store.read(job.id);
    for (let end = Date.now() + 2000; stored?.state !== 'succeeded' && Date.now() < end; stored = await store.read(job.id))
      await new Promise((r) => setTimeout(r, 20));
    expect(stored!.state).toBe('succeeded');
    const list = (await (await fetch(`${base}/jobs`)).json()) as { jobs: JobRecord[] };
    expect(list.jobs[0].id).toBe(job.id);
  });

  it('serves the same over NATS request/reply', async () => {
    const r = (
      await nc.request(JOB_SUBJECTS.submit, JSON.stringify({ op: 'broadcast', sizes: [8], iters: 1, warmup: 0, agents: ['a1', 'a3'], root: 1 }), {
        timeout: 5000,
      })
    ).json() as { ok: boolean; job: JobRecord };
    expect(r.ok).toBe(true);
    const job = await wait(r.job.id);
    expect(job.state).toBe('succeeded');
    expect(job.members.map((m) => m.name)).toEqual(['a1', 'a3']);
    const g = (await nc.request(JOB_SUBJECTS.get, JSON.stringify({ id: job.id }), { timeout: 5000 })).json() as { job: JobRecord };
    expect(g.job.rows[0].root).toBe(1);
    const bad = (await nc.request(JOB_SUBJECTS.submit, JSON.stringify({ op: 'nope' }), { timeout: 5000 })).json();
    expect(ErrorReplySchema.parse(bad).error).toMatchObject({ code: 'BAD_REQUEST', issues: [expect.stringMatching(/^op: /)] });
  });

  it('validates every NATS job request and answers errors like the other coordinator endpoints', async () => {
    const req = async (subject: string, body: unknown) => {
      const data = typeof body === 'string' ? new TextEncoder().encode(body) : JSON.stringify(body);
      return (await nc.request(subject, data, { timeout: 5000 })).json() as Record<string, unknown>;
    };
    const err = async (subject: string, body: unknown) => ErrorReplySchema.parse(await req(subject, body)).error;
    for (const s of [JOB_SUBJECTS.submit, JOB_SUBJECTS.get, JOB_SUBJECTS.list]) {
      expect(await err(s, '{not json')).toEqual({ code: 'BAD_REQUEST', message: `${s}: body is not valid JSON` });
    }
    expect(await err(JOB_SUBJECTS.get, {})).toMatchObject({ code: 'BAD_REQUEST', issues: [expect.stringMatching(/^id: /)] });
    expect(await err(JOB_SUBJECTS.get, { id: 'nope' })).toEqual({ code: 'NOT_FOUND', message: 'no job "nope"' });
    expect(await err(JOB_SUBJECTS.list, { limit: 'x' })).toMatchObject({ code: 'BAD_REQUEST', issues: [expect.stringMatching(/^limit: /)] });
    expect(await err(JOB_SUBJECTS.submit, { op: 'allReduce', sizes: [8], iters: 40_000 })).toMatchObject({
      code: 'BAD_REQUEST',
      issues: [expect.stringMatching(/^iters: at most 10000/)],
    });
    expect(await err(JOB_SUBJECTS.submit, { op: 'allReduce', sizes: [8], agents: ['zz'] })).toEqual({
      code: 'NOT_FOUND',
      message: 'no agent "zz" is registered',
    });
    const list = await req(JOB_SUBJECTS.list, { limit: 1 });
    expect(list).toMatchObject({ ok: true, jobs: [expect.objectContaining({ id: expect.any(String) })] });
    expect(list.jobs).toHaveLength(1);
    // REST: the same validation, in the error body every controller uses
    const limit = await fetch(`${base}/jobs?limit=x`);
    expect([limit.status, await limit.json()]).toEqual([
      400,
      expect.objectContaining({ statusCode: 400, code: 'BAD_REQUEST', issues: [expect.stringMatching(/^limit: /)] }),
    ]);
    const none = await fetch(`${base}/jobs/nope`);
    expect([none.status, await none.json()]).toEqual([404, { statusCode: 404, code: 'NOT_FOUND', message: 'no job "nope"' }]);
  });

  it('refuses more iterations than one NATS message can carry', async () => {
    const r = await post({ op: 'allReduce', agents: ['a0'], sizes: [8], iters: 40_000, warmup: 0 });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'BAD_REQUEST', issues: [`iters: at most ${JOB_MAX_ITERS} (one size's samples must fit in one NATS message)`] });
    expect((await post({ op: 'allReduce', agents: ['a0'], sizes: [8], iters: 1, warmup: 20_000 })).body.issues).toEqual([
      expect.stringMatching(/^warmup: at most/),
    ]);
  });

  it('fails a job whose members end without results for every size, naming the sizes', async () => {
    behaviours.a1 = { skipSize: 1 };
    const job = await wait((await post({ op: 'allReduce', sizes: [8, 16, 32], iters: 1, warmup: 0, agents: ['a0', 'a1'] })).body.id);
    delete behaviours.a1;
    expect(job.state).toBe('failed');
    expect(job.reason).toBe('members ended without results for 1 of 3 sizes: 16 bytes; no samples from agent a1 (rank 1)');
    expect(job.failedAgent).toBe('a1');
    expect(job.rows.map((r) => r.bytes)).toEqual([8, 32]);
    expect(job.progress).toEqual({ done: 2, total: 3 }); // what was aggregated, not forced to the total
    // no member sent anything: every size is named, nobody in particular blamed
    behaviours.a0 = { skipSize: 0 };
    behaviours.a1 = { skipSize: 0 };
    const none = await wait((await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a0', 'a1'] })).body.id);
    delete behaviours.a0;
    delete behaviours.a1;
    expect([none.state, none.reason, none.failedAgent, none.rows.length, none.progress.done]).toEqual([
      'failed',
      'members ended without results for 1 of 1 sizes: 8 bytes',
      undefined,
      0,
      0,
    ]);
  });

  it('refuses bad requests, unknown agents and groups with a clear reason', async () => {
    expect((await post({ op: 'allReduce', sizes: [] })).status).toBe(400);
    const avg = await post({ op: 'allReduce', redop: 'avg', dtype: 'int32', sizes: [8] });
    expect([avg.status, avg.body]).toEqual([
      400,
      { statusCode: 400, code: 'BAD_REQUEST', message: 'invalid job: redop avg needs a floating-point dtype, got int32' },
    ]);
    const unknown = await post({ op: 'allReduce', sizes: [8], agents: ['a0', 'zz'] });
    expect(unknown.status).toBe(404);
    expect(unknown.body.message).toMatch(/no agent "zz"/);
    expect((await post({ op: 'allReduce', sizes: [8], group: 'nope' })).body.message).toMatch(/no group "nope"/);
    expect((await post({ op: 'broadcast', sizes: [8], agents: ['a0', 'a1'], root: 2 })).body.message).toMatch(/root 2/);
    const grp = await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, group: 'g1' });
    expect((await wait(grp.body.id)).members.map((m) => m.name)).toEqual(['a2', 'a0']);
  });

  it('runs jobs on disjoint agents at once; busy agents are waited for or refused', async () => {
    const sizes = Array.from({ length: 10 }, (_, i) => 8 << i);
    const j1 = await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a0', 'a1'] });
    const j2 = await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a2', 'a3'] });
    expect([j1.body.state, j2.body.state]).toEqual(['running', 'running']);
    const refused = await post({ op: 'allReduce', sizes: [8], agents: ['a1', 'a2'], onBusy: 'refuse' });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/busy: a1 \(job j.*\), a2 \(job j/);
    const queued = await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a1', 'a2'] });
    expect(queued.body.state).toBe('queued');
    const [r1, r2, r3] = await Promise.all([wait(j1.body.id), wait(j2.body.id), wait(queued.body.id)]);
    expect([r1.state, r2.state, r3.state]).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(Date.parse(r3.startedAt!)).toBeGreaterThanOrEqual(Math.max(Date.parse(r1.finishedAt!), Date.parse(r2.finishedAt!)) - 5);
  });

  it("a second coordinator replica sees the first one's jobs holding agents (claims in KV)", async () => {
    const replica = await startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir } });
    const other = replica.app;
    const otherBase = await other.getUrl();
    try {
      const sizes = Array.from({ length: 20 }, (_, i) => 8 << i);
      const j1 = await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a0', 'a1'] });
      expect(j1.body.state).toBe('running');
      const viaOther = (body: unknown) =>
        fetch(`${otherBase}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const refused = await viaOther({ op: 'allReduce', sizes: [8], agents: ['a1', 'a2'], onBusy: 'refuse' });
      expect(refused.status).toBe(409);
      expect(((await refused.json()) as { message: string }).message).toMatch(new RegExp(`busy: a1 \\(job ${j1.body.id}\\)`));
      // an nranks pick on the other replica leaves the held agents out
      const picked = (await (await viaOther({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, nranks: 2 })).json()) as JobRecord;
      expect(picked.members.map((m) => m.name)).toEqual(['a2', 'a3']);
      // (finished before the next test, which needs a2 and a3 idle)
      for (let end = Date.now() + 10_000; picked.state !== 'succeeded' && Date.now() < end; await new Promise((r) => setTimeout(r, 25))) {
        Object.assign(picked, await (await fetch(`${otherBase}/jobs/${picked.id}`)).json());
      }
      expect(picked.state).toBe('succeeded');
      // a job there that waits for those agents starts once the first job has released them
      const after = await viaOther({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a0', 'a1'] });
      expect(after.status).toBe(201);
      const id = ((await after.json()) as JobRecord).id;
      let j: JobRecord | undefined;
      for (let end = Date.now() + 10_000; j?.state !== 'succeeded' && Date.now() < end; await new Promise((r) => setTimeout(r, 25))) {
        j = (await (await fetch(`${otherBase}/jobs/${id}`)).json()) as JobRecord;
      }
      expect(j!.state).toBe('succeeded');
      const first = await wait(j1.body.id);
      expect(Date.parse(j!.startedAt!)).toBeGreaterThanOrEqual(Date.parse(first.finishedAt!) - 5);
    } finally {
      await other.close();
    }
  });

  it('a replica that dies mid-job: its claims go stale, another replica frees the agents and fails the job', async () => {
    const replica = await startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir } });
    const other = replica.app;
    try {
      const sizes = Array.from({ length: 20 }, (_, i) => 8 << i);
      const started = (await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a2', 'a3'] }, await other.getUrl())).body;
      expect(started.state).toBe('running'); // (a queued job is the next test's case)
      const id = started.id;
      // "kill" it: no more ticks (claim renewals) and no more events, its job left running
      stopReplica(replica);
      const t0 = Date.now();
      let j = await wait(id, 20_000);
      expect(j.state).toBe('failed');
      expect(j.reason).toMatch(/replica running it .* stopped/);
      expect(Date.now() - t0).toBeLessThan(CLAIM_STALE_MS + 2 * CLAIM_RENEW_MS + 2000);
      // and its agents are free again
      j = await wait((await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a2', 'a3'], onBusy: 'refuse' })).body.id);
      expect(j.state).toBe('succeeded');
    } finally {
      await other.close();
    }
  }, 40_000);

  it("a replica that dies between freeing a running job's agents and writing its end: another replica fails it once the lease is stale", async () => {
    const replica = await startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir } });
    const other = replica.app;
    try {
      const sizes = Array.from({ length: 20 }, (_, i) => 8 << i);
      const started = (await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a2', 'a3'] }, await other.getUrl())).body;
      expect(started.state).toBe('running');
      // "kill" it right after it released the claims: no claim goes stale, the record says running
      stopReplica(replica);
      const claims = await new Kvm(nc).create(clusterNames().buckets.claims);
      for (const a of ['a2', 'a3']) await claims.delete(a);
      const t0 = Date.now();
      const j = await wait(started.id, 3 * CLAIM_STALE_MS);
      expect(j.state).toBe('failed');
      expect(j.reason).toBe(`the coordinator replica running it (${started.replica}) stopped`);
      expect(Date.now() - t0).toBeLessThan(2 * CLAIM_STALE_MS + 2 * CLAIM_RENEW_MS + 2000);
    } finally {
      await other.close();
    }
  }, 60_000);

  it("a replica that dies with a queued job: another replica fails it once the replica's lease is stale", async () => {
    const replica = await startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir } });
    const other = replica.app;
    // a long job here holds a2 and a3 (20 ms per size), so the other replica's job for them queues
    const hold = await post({ op: 'allReduce', sizes: Array.from({ length: 2000 }, () => 8), iters: 1, warmup: 0, agents: ['a2', 'a3'] });
    expect(hold.body.state).toBe('running');
    try {
      const queued = (await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a2', 'a3'] }, await other.getUrl())).body;
      expect(queued.state).toBe('queued');
      expect(queued.replica).toMatch(/^[0-9a-f]{8}$/);
      // "kill" the other replica: no more ticks (lease renewals, queue draining) and no more events
      stopReplica(replica);
      const t0 = Date.now();
      const j = await wait(queued.id, 3 * CLAIM_STALE_MS);
      expect(j.state).toBe('failed');
      expect(j.reason).toBe(`the coordinator replica that queued it (${queued.replica}) stopped before it could start`);
      expect(Date.now() - t0).toBeLessThan(2 * CLAIM_STALE_MS + 2 * CLAIM_RENEW_MS + 2000);
    } finally {
      await fetch(`${base}/jobs/${hold.body.id}`, { method: 'DELETE' });
      await wait(hold.body.id);
      await other.close();
    }
  }, 60_000);

  it('a replica restarted under the same id (CMESH_REPLICA_ID of a pod) fails the queued jobs its earlier process left', async () => {
    const replicaOf = (replica: string) => startReplica({ natsUrl: nats.url, directory: { provide: AgentDirectory, useValue: dir }, replica });
    const firstReplica = await replicaOf('pod-a');
    const first = firstReplica.app;
    let second: INestApplication | undefined;
    const hold = await post({ op: 'allReduce', sizes: Array.from({ length: 2000 }, () => 8), iters: 1, warmup: 0, agents: ['a2', 'a3'] });
    expect(hold.body.state).toBe('running');
    try {
      const queued = (await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a2', 'a3'] }, await first.getUrl())).body;
      expect([queued.state, queued.replica]).toEqual(['queued', 'pod-a']);
      // the first process "dies"; its successor renews the same lease, so only it can tell
      stopReplica(firstReplica);
      second = (await replicaOf('pod-a')).app;
      const j = await wait(queued.id, 3 * CLAIM_STALE_MS);
      expect(j.state).toBe('failed');
      expect(j.reason).toBe('the coordinator replica that queued it (pod-a) stopped before it could start');
    } finally {
      await fetch(`${base}/jobs/${hold.body.id}`, { method: 'DELETE' });
      await wait(hold.body.id);
      await second?.close();
      await first.close();
    }
  }, 60_000);

  it('cancels a queued and a running job (DELETE /jobs/:id)', async () => {
    const sizes = Array.from({ length: 40 }, (_, i) => 8 * (i + 1));
    const run = await post({ op: 'allReduce', sizes, iters: 1, warmup: 0, agents: ['a0', 'a1'] });
    const queued = await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a1'] });
    expect([run.body.state, queued.body.state]).toEqual(['running', 'queued']);
    const cancels: string[] = [];
    const sub = nc.subscribe(JOB_SUBJECTS.cancel, {
      callback: (_e, m) => {
        cancels.push((m.json() as { jobId: string }).jobId);
      },
    });
    const del = async (id: string) => (await (await fetch(`${base}/jobs/${id}`, { method: 'DELETE' })).json()) as JobRecord;
    expect((await del(queued.body.id)).state).toBe('cancelled');
    const c = await del(run.body.id);
    expect([c.state, c.reason]).toEqual(['cancelled', 'cancelled by request']);
    await new Promise((r) => setTimeout(r, 100));
    sub.unsubscribe();
    expect(cancels).toEqual([run.body.id]); // members are told only about the one they were running
    expect((await fetch(`${base}/jobs/nope`, { method: 'DELETE' })).status).toBe(404);
    // the agents are free again
    expect((await wait((await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['a0', 'a1'], onBusy: 'refuse' })).body.id)).state).toBe(
      'succeeded',
    );
  });

  it('fails promptly naming a member that goes silent, and frees the others', async () => {
    behaviours.a2 = { dieAtSize: 1 };
    const t0 = Date.now();
    const j = await post({ op: 'allReduce', sizes: [8, 16, 32, 64, 128, 256], iters: 1, warmup: 0, agents: ['a0', 'a1', 'a2'] });
    const job = await wait(j.body.id);
    const took = Date.now() - t0;
    expect(job.state).toBe('failed');
    expect(job.failedAgent).toBe('a2');
    expect(job.reason).toMatch(/agent a2 \(rank 2\) lost/);
    expect(took).toBeLessThan(5000);
    delete behaviours.a2;
    // the survivors take the next job; the lost agent is left out of an nranks pick
    const next = await wait((await post({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, nranks: 3 })).body.id);
    expect(next.state).toBe('succeeded');
    expect(next.members.map((m) => m.name)).toEqual(['a0', 'a1', 'a3']);
  });

  it('blames the peer the data plane names, not the reporters', async () => {
    // rank 0 and rank 1 both report; rank 1 names rank 2, rank 0 names rank 1 (a cascade)
    behaviours.a0 = { failAtSize: { peers: [1], message: 'rank 1 died or closed its connection' } };
    behaviours.a1 = { failAtSize: { peers: [2], message: 'rank 2 died or closed its connection' } };
    behaviours.a2 = { failAtSize: { peers: [1], message: 'rank 1 died' } };
    behaviours.a3 = { failAtSize: { peers: [2], message: 'rank 2 died' } };
    // a2 also reports, so named minus reporters is empty: falls to the first reporter after the limit
    const all = await wait((await post({ op: 'allReduce', sizes: [8, 16, 32], iters: 1, warmup: 0, agents: ['a0', 'a1', 'a2', 'a3'] })).body.id);
    expect(all.state).toBe('failed');
    behaviours.a2 = { dieAtSize: 1 };
    const t0 = Date.now();
    const job = await wait((await post({ op: 'allReduce', sizes: [8, 16, 32], iters: 1, warmup: 0, agents: ['a0', 'a1', 'a2'] })).body.id);
    expect(job.state).toBe('failed');
    expect(job.failedAgent).toBe('a2');
    expect(job.reason).toMatch(/agent a2 \(rank 2\) failed: peers report/);
    expect(Date.now() - t0).toBeLessThan(2000);
    for (const k of Object.keys(behaviours)) delete behaviours[k];
  });
});

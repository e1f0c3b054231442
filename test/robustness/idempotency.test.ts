// Exactly-once submission on a real mesh with authentication on (nats-server, two coordinator
// replicas, two agents, the `client` tenant and a second tenant): a job submitted twice with the
// same Idempotency-Key (REST and NATS, to either replica) is one job dispatched once, counted on
// the subjects the agents receive their assignments on; the same key with another body is refused
// with IDEMPOTENCY_KEY_REUSED (422); another login's same key is its own job; a service member's
// join sent twice is one membership; and a replica SIGKILLed right after dispatching a job whose
// reply never reached its caller leaves the key in KV, so the caller's retry at the other replica
// gets the same job id and the job is dispatched once.
import { connect } from '@nats-io/transport-node';
import { NatsConnection, Subscription } from '@nats-io/nats-core';
import { randomUUID } from 'crypto';
import { clusterNames, JobAssignment, JobRequestInput, newServiceGroupKey } from '@cmesh/protocol';
import { ChaosMesh } from '../../bench/chaos/chaos-mesh';
import { COORDINATOR_USER } from '@cmesh/testing/mesh';
import { setTimeout as sleep } from 'timers/promises';

const n = clusterNames();
const JOB: JobRequestInput = { op: 'allReduce', sizes: [8, 1024], iters: 3, warmup: 0, nranks: 2 };

describe('idempotency keys', () => {
  let mesh: ChaosMesh;
  let asClient: NatsConnection;
  let asTenant: NatsConnection;
  let watcher: NatsConnection;
  let starts: Subscription;
  /** job id -> assignments published to agents */
  const dispatched = new Map<string, number>();

  async function login(user: string): Promise<NatsConnection> {
    const { pass } = mesh.clientLogin(user); // the coordinator's password file is read the same way
    return connect({ servers: mesh.natsUrl, user, pass, inboxPrefix: `_INBOX.${user}` });
  }

  async function rest(replica: number, body: unknown, key?: string): Promise<{ status: number; body: any }> {
    const base = mesh.replicas[replica].client.base;
    const res = await fetch(`${base}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${mesh.auth.apiToken}`, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  const overNats = async (nc: NatsConnection, subject: string, body: unknown) =>
    (await nc.request(subject, JSON.stringify(body), { timeout: 10_000 })).json<any>();

  /** A caller that sends the same submission again (same key) while no answer came, or the answer was UNAVAILABLE. */
  async function retrySubmit(nc: NatsConnection, body: unknown): Promise<any> {
    const deadline = Date.now() + 40_000;
    for (;;) {
      const reply = await nc
        .request(n.jobs.submit, JSON.stringify(body), { timeout: 5000 })
        .then((m) => m.json<any>())
        .catch((e: Error) => {
          if (Date.now() >= deadline) throw e;
          return undefined;
        });
      if (reply && (reply.ok || reply.error?.code !== 'UNAVAILABLE' || Date.now() >= deadline)) return reply;
      await sleep(250);
    }
  }

  /** Waits until the job ended (any replica answers) and the assignments it caused have arrived. */
  async function ended(id: string): Promise<void> {
    await mesh.clients()[0].waitJob(id, undefined, { timeoutMs: 60_000 });
    await watcher.flush();
  }

  beforeAll(async () => {
    mesh = await ChaosMesh.start({ agents: 2, replicas: 2, tenants: ['tenant-b'], readyTimeoutMs: 90_000 });
    [asClient, asTenant, watcher] = await Promise.all([login('client'), login('tenant-b'), login(COORDINATOR_USER)]);
    // every assignment the coordinators send to any agent: the runs, not only the ids
    starts = watcher.subscribe(n.jobs.start('*'), {
      callback: (_e, m) => {
        const a = m.json<JobAssignment>();
        dispatched.set(a.jobId, (dispatched.get(a.jobId) ?? 0) + 1);
      },
    });
    await watcher.flush();
  }, 120_000);

  afterAll(async () => {
    starts?.unsubscribe();
    await Promise.all([asClient, asTenant, watcher].map((c) => c?.close().catch(() => undefined)));
    await mesh?.stop();
  });

  it('REST: the same key twice, to both replicas, is one job run once; another body with it is a 422', async () => {
    const key = randomUUID();
    const first = await rest(0, JOB, key);
    expect(first.status).toBe(201);
    const again = await rest(1, JOB, key);
    const third = await rest(0, { ...JOB, dtype: 'float32' }, key); // the same request with a default spelled out
    expect([again.status, again.body.id, third.body.id]).toEqual([201, first.body.id, first.body.id]);
    // the key is the caller's: the job's record, which every reader of jobs sees, does not keep it
    expect(JSON.stringify(again.body)).not.toContain(key);
    await ended(first.body.id);
    expect(dispatched.get(first.body.id)).toBe(2); // one assignment per rank, once
    const other = await rest(1, { ...JOB, iters: 4 }, key);
    expect([other.status, other.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
    expect(other.body.message).toMatch(/Idempotency-Key was used at .* with another request/);
    // a key that is not one: refused, nothing made
    const bad = await rest(0, JOB, 'short');
    expect([bad.status, bad.body.code]).toEqual([400, 'BAD_REQUEST']);
    // without a key, every submission is a job of its own
    const a = await rest(0, JOB);
    const b = await rest(0, JOB);
    expect(a.body.id).not.toBe(b.body.id);
    await ended(a.body.id);
    await ended(b.body.id);
  }, 120_000);

  it("NATS: the key is the login's own: another tenant with the same key gets its own job; retries get the first", async () => {
    const key = randomUUID();
    const mine = await overNats(asClient, n.jobs.submit, { ...JOB, idempotencyKey: key });
    const theirs = await overNats(asTenant, n.jobs.submit, { ...JOB, idempotencyKey: key });
    expect([mine.ok, theirs.ok]).toEqual([true, true]);
    expect(theirs.job.id).not.toBe(mine.job.id);
    const retry = await overNats(asClient, n.jobs.submit, { ...JOB, idempotencyKey: key });
    expect(retry.job.id).toBe(mine.job.id);
    // the REST API is another caller again: the same key there is not the client login's
    const viaRest = await rest(0, JOB, key);
    expect([mine.job.id, theirs.job.id]).not.toContain(viaRest.body.id);
    const reused = await overNats(asTenant, n.jobs.submit, { ...JOB, sizes: [8], idempotencyKey: key });
    expect(reused).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    for (const id of [mine.job.id, theirs.job.id, viaRest.body.id]) await ended(id);
    expect([mine.job.id, theirs.job.id, viaRest.body.id].map((id) => dispatched.get(id))).toEqual([2, 2, 2]);
  }, 120_000);

  it('svc.join: the same join twice is one membership; another join with its key is refused', async () => {
    const idempotencyKey = randomUUID();
    const join = { name: `idem${Date.now() % 1e6}`, size: 2, member: randomUUID(), key: newServiceGroupKey().toString('base64'), idempotencyKey };
    const first = await overNats(asClient, n.serviceGroups.join, join);
    const again = await overNats(asClient, n.serviceGroups.join, join);
    expect(first).toMatchObject({ ok: true, round: 1, joined: 1 });
    expect(again).toEqual(first);
    const other = await overNats(asClient, n.serviceGroups.join, { ...join, member: randomUUID() });
    expect(other).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    // without the key the same member joining twice is the conflict it always was
    const { idempotencyKey: _, ...unkeyed } = join;
    expect(await overNats(asClient, n.serviceGroups.join, unkeyed)).toMatchObject({ ok: false, error: { code: 'CONFLICT' } });
    expect(await overNats(asClient, n.serviceGroups.leave, { name: join.name, member: join.member })).toEqual({ ok: true });
  }, 60_000);

  it('a replica killed between dispatch and reply: the retry at the other replica gets the same job, run once', async () => {
    const key = randomUUID();
    const before = new Set(dispatched.keys());
    // the caller's reply is lost: it goes to an inbox of the client login nobody reads
    asClient.publish(n.jobs.submit, JSON.stringify({ ...JOB, iters: 2000, sizes: [65536], idempotencyKey: key }), {
      reply: `_INBOX.client.lost.${randomUUID()}`,
    });
    let jobId: string | undefined;
    for (let i = 0; i < 200 && !jobId; i++) {
      jobId = [...dispatched.keys()].find((id) => !before.has(id));
      if (!jobId) await sleep(10);
    }
    expect(jobId).toBeDefined();
    // the replica that dispatched it dies now (its record names it)
    const rec = await mesh
      .clients()[0]
      .job(jobId!)
      .catch(() => mesh.clients()[1].job(jobId!));
    const victim = mesh.replicas.find((r) => r.id === rec.replica)!;
    await victim.proc.kill9();
    try {
      const survivor = mesh.replicas.find((r) => r !== victim)!;
      // the caller retries with the same key while its answer may be lost: an attempt sent the
      // instant the victim died can still reach it (nats-server has not yet read its socket's end)
      const retry = await retrySubmit(asClient, { ...JOB, iters: 2000, sizes: [65536], idempotencyKey: key });
      expect(retry).toMatchObject({ ok: true, job: { id: jobId } });
      const done = await survivor.client.waitJob(jobId!, undefined, { timeoutMs: 60_000 });
      // it ran (or was failed naming the replica that died): either way once
      expect(done.state === 'succeeded' || /replica/.test(done.reason ?? '')).toBe(true);
      await watcher.flush();
      expect(dispatched.get(jobId!)).toBe(2);
      expect([...dispatched.keys()].filter((id) => !before.has(id))).toEqual([jobId]);
    } finally {
      await mesh.restart(victim.proc);
    }
  }, 120_000);
});

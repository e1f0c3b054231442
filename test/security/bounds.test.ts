// Bounds on what a peer controls, tried as an attacker would against a mesh with authentication on
// (what `cmesh up` runs): the coordinator's queue limited to 2 waiting jobs (CMESH_JOB_QUEUE_MAX)
// and each agent's job worker to 512 MiB (CMESH_JOB_MEMORY_BYTES), the rest at the defaults.
//
// - a job with timeoutMs 3e9 (past Node's 2^31-1 ms timer: it fired at once, both healthy agents
//   were blamed as lost and every later job refused with 409), sizes of 2^31 bytes (a worker grew
//   to 12 GB and the OOM killer ran), a maxBytes of 2^40: 400 naming the field, over REST and over
//   NATS as the client login, and no job is made;
// - a job under the coordinator's limit but too large for the agents' memory: it fails before a
//   worker allocates anything, the reason naming the agent, and no agent is a suspect;
// - a third job waiting for busy agents: 429 / TOO_MANY_REQUESTS naming the limit; the two
//   queued ones run once the agents are free;
// - a hostile rank holding the run's secret against a TcpStore server: an oversize frame, a flood
//   of keys, connections and parked waits are each refused with StoreLimitError while another
//   rank's keys, counters and waits stay correct.
// After each attack a victim's job (timeout 24 h, the longest allowed) succeeds on both agents
// with every element checked (#wrong 0), and both agents are alive.
import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { tmpdir } from 'os';
import { join } from 'path';
import { StoreLimitError, TcpStore, startTcpStoreServer } from '@cmesh/collectives';
import { clusterNames, JobRecord, JobRequestInput } from '@cmesh/protocol';
import { Mesh, listAgents, startMesh } from '@cmesh/testing/mesh';

const n = clusterNames();
const MiB = 2 ** 20;
const VICTIM: JobRequestInput = { op: 'allReduce', sizes: [8, 4096, MiB], iters: 5, warmup: 1, check: true, nranks: 2, timeoutMs: 24 * 3600_000 };

describe('bounds on what a peer controls', () => {
  let mesh: Mesh;
  let stateDir: string;
  let client: NatsConnection;

  async function rest(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${mesh.coordinatorUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${mesh.auth!.apiToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json().catch(() => undefined) };
  }

  /** cmesh.jobs.submit as the client login (a tenant's CLI or service). */
  async function submitOverNats(body: unknown): Promise<any> {
    return (await client.request(n.jobs.submit, JSON.stringify(body), { timeout: 10_000 })).json();
  }

  async function jobCount(): Promise<number> {
    return (await rest('GET', '/jobs?limit=200')).body.jobs.length;
  }

  async function bothAlive(): Promise<void> {
    // ready, or busy until its next heartbeat says the job is over; never lost
    const agents = await listAgents(mesh.client);
    expect(agents.map((a) => [a.name, a.alive, a.state !== 'lost']).sort()).toEqual([
      ['agent-0', true, true],
      ['agent-1', true, true],
    ]);
  }

  function expectCorrect(job: JobRecord, sizes: readonly number[]): void {
    expect([job.state, job.reason, job.failedAgent]).toEqual(['succeeded', undefined, undefined]);
    expect(job.rows.map((r) => r.bytes)).toEqual(sizes);
    for (const r of job.rows) {
      expect(r.nranks).toBe(2);
      const ms = [r.outOfPlace, r.inPlace].filter((m) => m !== null);
      expect(ms.length).toBeGreaterThan(0);
      for (const m of ms) expect(m!.wrong).toBe(0);
    }
  }

  /** The victim's job on both agents: it succeeds, every element right, and nobody is blamed. */
  async function victimSucceeds(): Promise<void> {
    const job = await mesh.client.submitJob(VICTIM);
    expectCorrect(await mesh.client.waitJob(job.id, undefined, { timeoutMs: 60_000 }), VICTIM.sizes!);
    await bothAlive();
  }

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-sec-bounds-'));
    mesh = await startMesh({
      agents: 2,
      port: 0,
      auth: { stateDir },
      env: { CMESH_JOB_QUEUE_MAX: '2' },
      agentEnv: { CMESH_JOB_MEMORY_BYTES: String(512 * MiB) },
      write: () => undefined,
      readyTimeoutMs: 90_000,
    });
    const pass = readFileSync(join(stateDir, 'nats', 'client.password'), 'utf8').trim();
    client = await connect({ servers: mesh.natsUrl, user: 'client', pass, inboxPrefix: '_INBOX.client', reconnect: false });
  }, 120_000);

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('a timeout past 24 h is refused naming timeoutMs (REST and NATS), no job is made; a 24 h one runs and nobody is lost', async () => {
    const before = await jobCount();
    const attack = { op: 'allReduce', sizes: [8], nranks: 2, timeoutMs: 3e9 };
    const r = await rest('POST', '/jobs', attack);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'BAD_REQUEST', issues: ['timeoutMs: at most 86400000 ms (24 h)'] });
    expect(await submitOverNats(attack)).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST', issues: ['timeoutMs: at most 86400000 ms (24 h)'] } });
    expect(await jobCount()).toBe(before);
    await victimSucceeds();
  }, 90_000);

  it('sizes over the maximum are refused naming the field; nothing is allocated anywhere', async () => {
    const before = await jobCount();
    const tooBig = await rest('POST', '/jobs', { op: 'allReduce', sizes: [8, 2 ** 31], nranks: 2 });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body).toMatchObject({ code: 'BAD_REQUEST', issues: ["sizes.1: at most 1073741824 bytes (the coordinator's CMESH_JOB_MAX_BYTES)"] });
    const range = await rest('POST', '/jobs', { op: 'allReduce', minBytes: 2 ** 31, maxBytes: 2 ** 31, nranks: 2 });
    expect(range.body.issues).toEqual([
      "maxBytes: at most 1073741824 bytes (the coordinator's CMESH_JOB_MAX_BYTES)",
      "minBytes: at most 1073741824 bytes (the coordinator's CMESH_JOB_MAX_BYTES)",
    ]);
    const ceiling = await rest('POST', '/jobs', { op: 'allReduce', maxBytes: 2 ** 40, nranks: 2 });
    expect([ceiling.status, ceiling.body.issues]).toEqual([400, ['maxBytes: at most 4294967296 bytes']]);
    const overNats = await submitOverNats({ op: 'allGather', sizes: [2 ** 31], nranks: 2 });
    expect(overNats).toMatchObject({
      ok: false,
      error: { code: 'BAD_REQUEST', issues: ["sizes.0: at most 1073741824 bytes (the coordinator's CMESH_JOB_MAX_BYTES)"] },
    });
    expect(await jobCount()).toBe(before);
    await victimSucceeds();
  }, 90_000);

  it("a job too large for the agents' memory fails before a worker allocates, naming the agent; it is no suspect", async () => {
    const job = await mesh.client.submitJob({ op: 'allReduce', sizes: [8, 256 * MiB], nranks: 2, iters: 1, warmup: 0 });
    const done = await mesh.client.waitJob(job.id, undefined, { timeoutMs: 30_000 });
    expect(done.state).toBe('failed');
    expect(done.failedAgent).toMatch(/^agent-[01]$/);
    const m = done.members.find((x) => x.name === done.failedAgent)!;
    expect(done.reason).toBe(
      `agent ${m.name} (rank ${m.rank}) failed: JobMemoryError: agent ${m.name} cannot run this job: its largest size (268435456 bytes of allReduce, float32) ` +
        'needs about 1.50 GiB in the job worker, more than the 0.50 GiB this agent allows (its memory or cgroup limit, or CMESH_JOB_MEMORY_BYTES)',
    );
    expect(done.rows).toEqual([]);
    await victimSucceeds();
  }, 90_000);

  it('a job that would wait behind a full queue is refused with 429 naming the limit (REST and NATS); the queued ones still run', async () => {
    // both agents busy for a while: every other job must wait
    const blocker = await mesh.client.submitJob({ op: 'allReduce', sizes: [MiB], iters: 10_000, warmup: 0, check: false, modes: ['out-of-place'], nranks: 2 });
    expect(blocker.state).toBe('running');
    const queued = [await mesh.client.submitJob(VICTIM), await mesh.client.submitJob(VICTIM)];
    expect(queued.map((j) => j.state)).toEqual(['queued', 'queued']);
    const full = 'the job queue is full: 2 jobs are waiting, the limit is 2 (CMESH_JOB_QUEUE_MAX); try again later';
    const r = await rest('POST', '/jobs', VICTIM);
    expect([r.status, r.body]).toEqual([429, { statusCode: 429, code: 'TOO_MANY_REQUESTS', message: full }]);
    expect(await submitOverNats(VICTIM)).toEqual({ ok: false, error: { code: 'TOO_MANY_REQUESTS', message: full } });
    expect((await rest('DELETE', `/jobs/${blocker.id}`)).body.state).toBe('cancelled');
    for (const j of queued) expectCorrect(await mesh.client.waitJob(j.id, undefined, { timeoutMs: 60_000 }), VICTIM.sizes!);
    await bothAlive();
    await victimSucceeds();
  }, 120_000);
});

describe("a hostile rank with the run's secret against a TcpStore server", () => {
  const SECRET = 'bounds-attack-secret-0123456789abcdef';

  it('each flood is refused with StoreLimitError and changes nothing; another rank keeps its keys, counters and waits', async () => {
    const server = await startTcpStoreServer({
      port: 0,
      secret: SECRET,
      limits: { maxKeys: 200, maxBytes: 64 * 1024, maxConnections: 6, maxWaitsPerConnection: 50, maxWaits: 60 },
    });
    const open: TcpStore[] = [];
    const store = async () => {
      const s = await TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 10_000, secret: SECRET });
      open.push(s);
      return s;
    };
    try {
      const rank = await store();
      const attacker = await store();
      await rank.set('addr/0', '10.0.0.1:29500');
      await rank.add('joined', 1);
      const parked = rank.wait(['go']);

      // a 65 MiB value: over the frame limit, refused and skipped; the attacker's connection goes on
      // (a set is not answered: its refusal fails the next operation)
      await attacker.set('big', Buffer.alloc(65 * MiB));
      await expect(attacker.numKeys()).rejects.toThrow(/set of key "big" refused: .*maxFrameBytes 67108864/);
      // parked waits: 50 on one connection, 60 in all (the rank's own wait is one of them)
      const gets = Array.from({ length: 50 }, (_, i) => attacker.get(`never/${i}`).catch(() => 'closed'));
      await expect(attacker.get('never/50')).rejects.toThrow(/maxWaitsPerConnection 50/);
      const second = await store();
      const more = Array.from({ length: 9 }, (_, i) => second.get(`never2/${i}`).catch(() => 'closed'));
      await expect(second.wait(['a', 'b'])).rejects.toThrow(/maxWaits 60/);
      // connections: 6 at most (rank, attacker, second, and three more)
      for (let i = 0; i < 3; i++) await store();
      await expect(TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 5000, secret: SECRET })).rejects.toThrow(StoreLimitError);
      // the rank's parked wait was not disturbed: its key answers it
      await rank.set('go', '1');
      await parked;

      // a flood of keys until the server says no, then of bytes into the keys it made
      let refused: unknown;
      for (let i = 0; i < 1000; i++) await attacker.set(`k/${i}`, '');
      await attacker.deleteKey('none'); // answered after every refusal: they are reported together next
      refused = await attacker.numKeys().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(StoreLimitError);
      expect((refused as Error).message).toMatch(/the store holds 200 keys, its limit \(maxKeys 200\); \d+ later set\(s\) refused too/);
      for (let i = 0; i < 200; i++) await attacker.set(`k/${i}`, Buffer.alloc(512));
      await attacker.deleteKey('none');
      refused = await attacker.numKeys().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(StoreLimitError);
      expect((refused as Error).message).toMatch(/maxBytes 65536/);

      // the other rank: its keys and counters are intact, and it can still change them in place
      expect((await rank.get('addr/0')).toString()).toBe('10.0.0.1:29500');
      expect(await rank.add('joined', 1)).toBe(2);
      await rank.set('addr/0', '10.0.0.2:29500');
      expect((await rank.get('addr/0')).toString()).toBe('10.0.0.2:29500');
      expect(await rank.check(['addr/0', 'joined', 'go'])).toBe(true);
      await attacker.close();
      await second.close();
      expect(await Promise.all([...gets, ...more])).toEqual(new Array(59).fill('closed'));
    } finally {
      for (const s of open) await s.close();
      await server.close();
    }
  }, 60_000);
});

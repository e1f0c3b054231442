// Fuzzing what reaches the coordinator besides its request subjects, on a real mesh (nats-server,
// the coordinator, 2 agents; CMESH_FUZZ_RUNS cases each, default 10000, 3000 for the gathered trace
// replies and the KV records, which go through several processes per case; seeds printed):
//
// - `scans.*` requests: malformed ones, and well-formed hostile ones (agents unknown, named twice,
//   with control characters or at the limits; every size, count and timeout at its maximum). Each
//   gets a typed error reply or, for get/list, an answer; never INTERNAL or silence, and no scan
//   starts.
// - gather replies: forged answers to the coordinator's trace requests (hostile dumps claiming the
//   running job, a made-up one or none, with garbled MACs; and malformed ones), many per request,
//   while a real job runs. GET /traces and GET /groups/<job>/trace answer every time; a report is
//   verified only for the real job and names only its ranks; the job finishes correctly.
// - gathered replies: forged answers to the status requests of a placed service group's ranks
//   (malformed, and statuses under a MAC that is not the group's): never shown, the group works.
// - KV records written straight into the coordinator's buckets (state, jobs, claims, replicas,
//   scans) as if the store were corrupted: malformed values and well-formed hostile ones. Every
//   list and read answers (200 or 404, never 500), and the watched buckets keep being watched.
//
// Pass: no process crashed or printed an unhandled error, none went deaf (afterwards the
// coordinator answers a request on NATS and REST, and a checked job finishes correctly).
import fc from 'fast-check';
import { connect } from '@nats-io/transport-node';
import { headers, NatsConnection } from '@nats-io/nats-core';
import { KV, Kvm } from '@nats-io/kv';
import { TRACE_MAC_HEADER } from '@cmesh/collectives';
import { clusterNames, decodeMessage, ErrorReplySchema, JobRecord, ScanRequestSchema, TraceReport, TraceReportSchema } from '@cmesh/protocol';
import { connectMesh } from '@cmesh/client';
import { ForgedAnswer, forgedTraceAnswer, fuzzPlan, invalidJsonPayload, runFuzz, crashLines } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

const enc = new TextEncoder();
const n = clusterNames();

/** Strings a schema may take that a careless reader would not expect. */
const HOSTILE_STRINGS = ['', ' ', '\u001b[2J\u001b[31mred', '\u0000', '../../etc/passwd', '*', '>', 'é', 'agent-0', 'x'.repeat(5000), '__proto__'];
const HOSTILE_NUMBERS = [0, -1, 0.5, 1e308, -1e308, 2 ** 53, 2 ** 31, -(2 ** 31)];

/** Values of the same JSON shape as `v`, at every depth, with hostile strings, numbers and array lengths. */
function sameShape(v: unknown, depth = 0): fc.Arbitrary<unknown> {
  if (typeof v === 'string') return fc.oneof(fc.constant(v), fc.constantFrom(...HOSTILE_STRINGS), fc.string({ maxLength: 40 }));
  if (typeof v === 'number') return fc.oneof(fc.constant(v), fc.constantFrom(...HOSTILE_NUMBERS));
  if (typeof v === 'boolean') return fc.boolean();
  if (v === null || typeof v !== 'object' || depth > 4) return fc.constant(v);
  if (Array.isArray(v)) {
    if (!v.length) return fc.constant(v);
    const item = sameShape(v[0], depth + 1);
    return fc.oneof(
      fc.constant(v),
      fc.constant([]),
      fc.array(item, { maxLength: 4 }),
      item.map((x) => Array.from({ length: 1000 }, () => x)),
    );
  }
  return fc.record(Object.fromEntries(Object.entries(v).map(([k, x]) => [k, sameShape(x, depth + 1)])));
}

describe('coordinator inputs under fuzzing: scans.*, gathered replies, KV records', () => {
  let mesh: Mesh;
  let nc: NatsConnection;
  const output: string[] = [];
  let died: string | null = null;
  const url = (p: string) => `${mesh.coordinatorUrl}${p}`;
  /** GET, sent again once when a kept-alive socket was closed by the server as it was reused (as MeshClient does) */
  const httpGet = async (p: string): Promise<Response> => {
    try {
      return await fetch(url(p));
    } catch (e) {
      const code = (e as { cause?: { code?: string } }).cause?.code;
      if (code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET') throw e;
      return fetch(url(p));
    }
  };

  beforeAll(async () => {
    mesh = await startMesh({ agents: 2, port: 0, write: (l) => output.push(l), readyTimeoutMs: 90_000 });
    void mesh.died.then((d) => (died = d));
    nc = await connect({ servers: mesh.natsUrl });
  }, 120_000);

  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await mesh?.stop();
  });

  const request = async (subject: string, data: Uint8Array) => (await nc.request(subject, data, { timeout: 15_000 })).json() as Record<string, unknown>;

  /** One checked job on both agents, to the end: every element of both modes right. */
  async function checkedJob(iters: number): Promise<string> {
    const j = await mesh.client.submitJob({ op: 'allReduce', sizes: [1 << 20], iters, warmup: 1, check: true, agents: ['agent-0', 'agent-1'] });
    return j.id;
  }
  async function expectCorrect(id: string): Promise<void> {
    const done: JobRecord = await mesh.client.waitJob(id, undefined, { timeoutMs: 180_000 });
    expect([done.state, done.reason]).toEqual(['succeeded', undefined]);
    expect(done.rows.flatMap((r) => [r.outOfPlace?.wrong, r.inPlace?.wrong])).toEqual([0, 0]);
  }

  it('scans.* requests: malformed and well-formed hostile', async () => {
    const BATCH = 50;
    const plan = fuzzPlan('coordinator nats scans.*', BATCH);
    const started = Date.now();
    const name = fc.oneof(
      fc.constantFrom(...HOSTILE_STRINGS.filter((s) => s.length > 0 && s !== 'agent-0')),
      fc.string({ minLength: 1, maxLength: 64 }).filter((s) => s !== 'agent-0' && s !== 'agent-1'),
    );
    // never a valid scan: an agent unknown (or not alive), or one named twice
    const agents = fc.oneof(
      fc
        .tuple(fc.subarray(['agent-0', 'agent-1']), fc.array(name, { minLength: 1, maxLength: 1024 }))
        .chain(([real, fake]) => fc.shuffledSubarray([...real, ...fake], { minLength: real.length + fake.length })),
      fc.constantFrom(['agent-0', 'agent-0'], ['agent-1', 'agent-0', 'agent-1']),
    );
    const max = { latencyBytes: 1 << 20, bandwidthBytes: 256 << 20, iters: 1000, warmup: 1000, timeoutMs: 600_000 };
    const hostileRun = fc.record({
      agents,
      latencyBytes: fc.constantFrom(1, max.latencyBytes),
      bandwidthBytes: fc.constantFrom(1, max.bandwidthBytes),
      iters: fc.constantFrom(1, max.iters),
      warmup: fc.constantFrom(0, max.warmup),
      collectives: fc.boolean(),
      backend: fc.constantFrom('tcp', 'nccl'),
      timeoutMs: fc.constantFrom(1, max.timeoutMs),
      slowRatio: fc.constantFrom(Number.MIN_VALUE, 0.5, 1 - Number.EPSILON),
    });
    const id = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), fc.constantFrom('s0', 'x'.repeat(64)));
    const cases = fc.oneof(
      hostileRun.map((b) => ({ subject: n.scans.run, what: 'hostile run', data: enc.encode(JSON.stringify(b)) })),
      id.map((i) => ({ subject: n.scans.get, what: 'get of an unknown id', data: enc.encode(JSON.stringify({ id: i })) })),
      fc.integer({ min: 1, max: 1000 }).map((limit) => ({ subject: n.scans.list, what: 'list', data: enc.encode(JSON.stringify({ limit })) })),
      invalidJsonPayload(
        { agents: ['agent-0', 'fz-nobody'], iters: 5, bandwidthBytes: 1024 },
        { required: ['agents', 'iters', 'bandwidthBytes'], constrained: ['iters', 'bandwidthBytes'], maxBytes: 256 * 1024 },
      )
        // a body that loses its agents (a key left out, or under __proto__) asks for a real scan of every agent: not a case
        .filter((c) => {
          const d = decodeMessage(ScanRequestSchema, c.data);
          return !d.ok || d.value.agents !== undefined;
        })
        .map((c) => ({ subject: n.scans.run, ...c })),
      invalidJsonPayload({ id: 's0' }, { required: ['id'], constrained: ['id'], maxBytes: 256 * 1024 }).map((c) => ({ subject: n.scans.get, ...c })),
      invalidJsonPayload({ limit: 5 }, { required: ['limit'], constrained: ['limit'], maxBytes: 256 * 1024 }).map((c) => ({ subject: n.scans.list, ...c })),
    );
    const bad = await runFuzz(plan, fc.array(cases, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      const replies = await Promise.all(
        batch.map((c) =>
          request(c.subject, c.data).then(
            (r) => ({ c, r }),
            (e: Error) => ({ c, r: { noReply: e.message } as Record<string, unknown> }),
          ),
        ),
      );
      const wrong: string[] = [];
      for (const { c, r } of replies) {
        const err = ErrorReplySchema.safeParse(r);
        const fine = err.success ? err.data.error.code !== 'INTERNAL' : c.subject !== n.scans.run && r.ok === true;
        if (!fine)
          wrong.push(
            `${c.subject} ${c.what} (${c.data.length} bytes: ${Buffer.from(c.data.subarray(0, 120)).toString()}) -> ${JSON.stringify(r).slice(0, 300)}`,
          );
      }
      return wrong;
    });
    expect(bad.slice(0, 20)).toEqual([]);
    // no scan was started by any of them
    const scans = (await request(n.scans.list, enc.encode('{"limit":1000}'))) as { ok: boolean; scans: { trigger: string }[] };
    expect(scans.ok).toBe(true);
    expect(scans.scans.filter((x) => x.trigger === 'request')).toEqual([]);
    process.stdout.write(`fuzz coordinator nats scans.*: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }, 300_000);

  it('gathered replies: forged trace answers, hostile and malformed, while a real job runs', async () => {
    const BATCH = 250;
    const plan = fuzzPlan('coordinator gathered trace replies', BATCH, 3000);
    const started = Date.now();
    const job = await checkedJob(300);
    let pending: ForgedAnswer[] = [];
    let answered = 0;
    const sub = nc.subscribe(n.trace.collect, {
      callback: (err, m) => {
        if (err) return;
        const batch = pending;
        pending = [];
        for (const a of batch) {
          const h = headers();
          try {
            if (a.mac !== undefined) h.set(TRACE_MAC_HEADER, a.mac);
          } catch {
            // a value nats.js will not put in a header: sent without one
          }
          m.respond(a.data, { headers: h });
          answered++;
        }
      },
    });
    await nc.flush();
    let asks = 0;
    const bad = await runFuzz(plan, fc.array(forgedTraceAnswer([job, 'fz-job']), { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      pending = batch;
      const path = asks++ % 2 ? `/groups/${job}/trace?waitMs=500` : '/traces?waitMs=500';
      const res = await httpGet(path).catch((e: Error) => ({ error: `${e.message} (${String((e as { cause?: unknown }).cause)})` }));
      if ('error' in res) return [`GET ${path}: ${res.error}`];
      const wrong: string[] = [];
      if (res.status !== 200 && !(res.status === 404 && path.startsWith('/groups'))) return [`GET ${path}: ${res.status} ${(await res.text()).slice(0, 300)}`];
      if (res.status === 404) return [];
      const parsed = TraceReportSchema.safeParse(await res.json());
      if (!parsed.success) return [`GET ${path}: not a TraceReport: ${parsed.error.message.slice(0, 300)}`];
      const r: TraceReport = parsed.data;
      for (const g of r.reports) {
        // verified: only the real job, with only its two ranks; every forged report is marked
        if (g.verified !== false && (g.job !== job || g.verified !== true || JSON.stringify(g.ranks) !== '[0,1]'))
          wrong.push(`GET ${path}: ${JSON.stringify(g).slice(0, 300)}`);
      }
      return wrong;
    });
    sub.unsubscribe();
    expect(bad.slice(0, 20)).toEqual([]);
    expect(answered).toBeGreaterThan(plan.cases / 2); // most cases reached the coordinator
    await expectCorrect(job);
    process.stdout.write(
      `fuzz coordinator gathered trace replies: ${plan.cases} cases (${answered} sent) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
  }, 300_000);

  it("gathered replies: forged status answers of a placed service group's ranks", async () => {
    const BATCH = 250;
    const plan = fuzzPlan('coordinator gathered svc status replies', BATCH);
    const started = Date.now();
    const conns = await Promise.all([0, 1].map(() => connectMesh({ servers: mesh.natsUrl, local: false })));
    try {
      const groups = await Promise.all(conns.map((c, i) => c.join('fz-status', { size: 2, label: `fz-${i}`, timeout: 90_000 })));
      // forged answers: malformed ones, and statuses of any rank that no real rank would send (queued >= 1e6), under a MAC that is not the group's
      const FORGED_QUEUED = 1_000_000;
      const valid = {
        rank: 0,
        running: { op: 'allReduce', seq: 1, dtype: 'float32', count: 4, since: new Date().toISOString() },
        queued: FORGED_QUEUED,
        opsDone: 0,
        bytes: 0,
      };
      const forged = fc.tuple(
        fc.oneof(
          fc
            .record({
              rank: fc.oneof(fc.constantFrom(0, 1), fc.nat()),
              queued: fc.integer({ min: FORGED_QUEUED, max: 2 ** 53 - 1 }),
              running: sameShape(valid.running),
              opsDone: fc.nat(),
              bytes: fc.nat(),
            })
            .map((v) => ({ what: 'forged status', data: enc.encode(JSON.stringify(v)) })),
          invalidJsonPayload(valid, { required: ['rank', 'running', 'queued'], constrained: ['rank', 'queued'], maxBytes: 128 * 1024 }),
        ),
        fc.oneof(
          fc.constant(undefined),
          fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 }),
          fc.string({ maxLength: 80 }),
        ),
      );
      let pending: Array<[{ what: string; data: Uint8Array }, string | undefined]> = [];
      let sent = 0;
      const sub = nc.subscribe(n.serviceGroups.status('*'), {
        callback: (err, m) => {
          if (err || !m.reply) return;
          const batch = pending;
          pending = [];
          for (const [c, mac] of batch) {
            const h = headers();
            try {
              if (mac !== undefined) h.set('Cmesh-Mac', mac);
            } catch {
              // a value nats.js will not put in a header: sent without one
            }
            nc.publish(m.reply, c.data, { headers: h });
            sent++;
          }
        },
      });
      await nc.flush();
      const bad = await runFuzz(plan, fc.array(forged, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
        pending = batch;
        const res = await httpGet('/service-groups/fz-status?waitMs=300').catch((e: Error) => ({ error: e.message }));
        if ('error' in res) return [`GET /service-groups/fz-status: ${res.error}`];
        if (res.status !== 200) return [`GET /service-groups/fz-status: ${res.status} ${(await res.text()).slice(0, 300)}`];
        const g = (await res.json()) as { state: string; inFlight?: { ranks: Array<{ rank: number; queued: number }> } };
        const wrong = g.state !== 'placed' ? [`the group is ${g.state}`] : [];
        for (const r of g.inFlight?.ranks ?? []) if (r.rank > 1 || r.queued >= FORGED_QUEUED) wrong.push(`a forged status was shown: ${JSON.stringify(r)}`);
        return wrong;
      });
      sub.unsubscribe();
      expect(bad.slice(0, 20)).toEqual([]);
      expect(sent).toBeGreaterThan(plan.cases / 2);
      // the group still works: an allReduce of [1, 2, 3, 4] and [10, 20, 30, 40] on its 2 ranks
      const t = [new Float32Array([1, 2, 3, 4]), new Float32Array([10, 20, 30, 40])];
      await Promise.all(groups.map((g, i) => g.allReduce(t[i])));
      for (const x of t) expect([...x]).toEqual([11, 22, 33, 44]);
      await Promise.all(groups.map((g) => g.leave()));
    } finally {
      await Promise.all(conns.map((c) => c.close().catch(() => undefined)));
    }
    process.stdout.write(`fuzz coordinator gathered svc status replies: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }, 300_000);

  it('KV records written straight into the buckets: malformed and well-formed hostile', async () => {
    const BATCH = 100;
    const plan = fuzzPlan('coordinator kv records', BATCH, 3000);
    const started = Date.now();
    const kvm = new Kvm(nc);
    const open = async (b: string) => kvm.open(b, { bindOnly: true });
    const state = await open(n.buckets.state);
    const buckets: Record<string, KV> = {
      state,
      jobs: await open(n.buckets.jobs),
      claims: await open(n.buckets.claims),
      replicas: await open(n.buckets.replicas),
      scans: await open(n.buckets.scans),
    };
    const real = async (kv: KV, key: string) => (await kv.get(key))!.json() as Record<string, unknown>;
    const agent = await real(state, 'agents.agent-0');
    const lastJob = (await mesh.client.jobs(1))[0];
    const templates: Array<{ bucket: string; keys: string[]; valid: Record<string, unknown> }> = [
      { bucket: 'state', keys: ['agents.fz-a0', 'agents.fz-a1'], valid: { ...agent, agentId: 'fz-a0', name: 'fz-a0' } },
      {
        bucket: 'state',
        keys: ['groups.fz-g0', 'groups.fz-g1'],
        valid: { id: 'fz-g0', members: ['agent-0'], storePrefix: 'fz', createdAt: new Date().toISOString() },
      },
      {
        bucket: 'state',
        keys: ['rdzv.fz-r0'],
        valid: {
          runId: 'fz-r0',
          round: 0,
          state: 'open',
          minNodes: 1,
          maxNodes: 2,
          lastCallMs: 10,
          participants: [{ nodeId: 'n', joinedAt: new Date().toISOString() }],
          waiting: [],
        },
      },
      {
        bucket: 'state',
        keys: ['svc.fz-s0'],
        valid: {
          name: 'fz-s0',
          round: 1,
          state: 'joining',
          size: 2,
          joined: [{ member: 'm', joinedAt: new Date().toISOString() }],
          updatedAt: new Date().toISOString(),
        },
      },
      { bucket: 'state', keys: ['counters.groups', 'leader'], valid: { holder: 'fz', expiresAt: 0 } },
      {
        bucket: 'jobs',
        keys: ['fz-j0', 'fz-j1'],
        valid: { ...(await real(buckets.jobs, lastJob.id)), id: 'fz-j0', members: [{ agentId: 'fz-a0', name: 'fz-a0', rank: 0 }] },
      },
      { bucket: 'claims', keys: ['fz-a0', 'fz-a1'], valid: { jobId: 'fz-j0', replica: 'fz-replica', renewedAt: Date.now() } },
      { bucket: 'replicas', keys: ['fz-replica'], valid: { renewedAt: Date.now() } },
      {
        bucket: 'scans',
        keys: ['scan.fz-s0', 'lease'],
        valid: {
          id: 'fz-s0',
          state: 'failed',
          trigger: 'request',
          request: {},
          agents: ['agent-0', 'agent-1'],
          rounds: 1,
          progress: { done: 0, total: 1 },
          links: [],
          collectives: [],
          replica: 'fz',
          createdAt: new Date().toISOString(),
        },
      },
    ];
    const kvCase = fc.constantFrom(...templates).chain((t) =>
      fc
        .tuple(
          fc.constantFrom(...t.keys),
          fc.oneof(
            sameShape(t.valid).map((v) => ({ what: 'same shape, hostile values', data: enc.encode(JSON.stringify(v)) })),
            invalidJsonPayload(t.valid, {
              required: Object.keys(t.valid),
              constrained: Object.keys(t.valid).filter((k) => typeof t.valid[k] !== 'object'),
              maxBytes: 256 * 1024,
            }),
            fc.constant({ what: 'deleted', data: null }),
          ),
        )
        .map(([key, v]) => ({ bucket: t.bucket, key, ...v }))
        // what nats-server takes in one message (1 MiB)
        .filter((c) => !c.data || c.data.length < 900 * 1024),
    );
    const reads = [
      '/agents',
      '/groups',
      '/rendezvous',
      '/jobs',
      '/scans',
      '/service-groups',
      '/groups/fz-g0',
      '/jobs/fz-j0',
      '/scans/fz-s0',
      '/rendezvous/fz-r0',
      '/service-groups/fz-s0',
    ];
    let batches = 0;
    const bad = await runFuzz(plan, fc.array(kvCase, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      // written together (the order of writes to one key does not matter here), then read together
      await Promise.all(batch.map((c) => (c.data ? buckets[c.bucket].put(c.key, c.data) : buckets[c.bucket].delete(c.key))));
      const wrong: string[] = [];
      await Promise.all(
        (batches++ % 10 === 0 ? [...reads, '/ui'] : reads).map(async (p) => {
          const res = await httpGet(p);
          if (res.status >= 500)
            wrong.push(
              `GET ${p} after ${batch
                .map((c) => `${c.bucket}/${c.key}: ${c.what}`)
                .join(', ')
                .slice(0, 400)}: ${res.status} ${(await res.text()).slice(0, 300)}`,
            );
          else await res.arrayBuffer();
        }),
      );
      return wrong;
    });
    expect(bad.slice(0, 20)).toEqual([]);
    // the watches still run: a valid record written now is seen
    await state.put('agents.fz-seen', enc.encode(JSON.stringify({ ...agent, agentId: 'fz-seen', name: 'fz-seen' })));
    await state.put('rdzv.fz-seen', enc.encode(JSON.stringify(templates[2].valid).replace('fz-r0', 'fz-seen')));
    const seen = async () => {
      const a = (await mesh.client.get<{ agents: { agentId: string }[] }>('/agents')).agents.some((x) => x.agentId === 'fz-seen');
      const r = JSON.stringify(await mesh.client.get('/rendezvous')).includes('fz-seen');
      return a && r;
    };
    for (let end = Date.now() + 10_000; !(await seen()) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 100));
    expect(await seen()).toBe(true);
    // what was skipped was counted
    const metrics = await (await httpGet('/metrics')).text();
    expect(metrics).toMatch(new RegExp(`cmesh_rejected_messages_total\\{[^}]*subject="kv:${n.buckets.state}"`));
    for (const t of templates) for (const k of t.keys) await buckets[t.bucket].delete(k).catch(() => undefined);
    for (const k of ['agents.fz-seen', 'rdzv.fz-seen']) await state.delete(k);
    process.stdout.write(`fuzz coordinator kv records: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }, 300_000);

  it('afterwards: nothing crashed, the coordinator answers on NATS and REST, a checked job succeeds', async () => {
    expect(died).toBeNull();
    expect(crashLines(output)).toEqual([]);
    const agents = (await request(n.agents.list, enc.encode('{}'))) as { ok: boolean; agents: { agentId: string; state: string }[] };
    expect(agents.ok).toBe(true);
    expect(
      agents.agents
        .filter((a) => a.agentId.startsWith('agent-'))
        .map((a) => `${a.agentId}:${a.state}`)
        .sort(),
    ).toEqual(['agent-0:ready', 'agent-1:ready']);
    expect((await httpGet('/health')).status).toBe(200);
    await expectCorrect(await checkedJob(5));
  }, 240_000);
});

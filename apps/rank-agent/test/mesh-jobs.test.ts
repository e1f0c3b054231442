// Jobs through a real mesh: nats-server (Debian binary), the coordinator and 4 rank agents as
// processes. A job over 4 agents returns nccl-tests rows checked element by element by the
// ranks; killing one agent mid-job fails the job within 5 s naming it, its job worker does not
// outlive it, and the next job on the remaining agents succeeds; a job asking for nccl on a
// machine without a GPU fails with the sidecar's reason. Against a nats-server with a small
// max_payload, an agent that cannot report a size's samples fails the job with that reason.
import { execFileSync, spawn } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { NatsServer, freePort, startNatsServer, waitForPort, isAlive as alive } from '@cmesh/testing';
import { busBwFactor } from '@cmesh/bench';
import { JobEvent, JobRecord, clusterNames } from '@cmesh/protocol';
import { connect } from '@nats-io/transport-node';
import { Mesh, listAgents, startMesh } from '@cmesh/testing/mesh';

const childrenOf = (pid: number): number[] => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
};

function expectCorrect(job: JobRecord, sizes: number[], nranks: number) {
  expect(job.state).toBe('succeeded');
  expect(job.rows.map((r) => r.bytes)).toEqual(sizes);
  for (const r of job.rows) {
    expect(r.nranks).toBe(nranks);
    const ms = [r.outOfPlace, r.inPlace].filter((m) => m !== null);
    expect(ms.length).toBeGreaterThan(0);
    for (const m of ms) {
      expect(m!.wrong).toBe(0);
      expect(m!.timeUs).toBeGreaterThan(0);
      expect(m!.algBwGBs).toBeCloseTo(r.bytes / (m!.timeUs * 1e3), 9);
      expect(m!.busBwGBs).toBeCloseTo(m!.algBwGBs * busBwFactor(r.op, nranks), 9);
    }
  }
}

/** Stops the mesh and its nats-server, and checks that none of the mesh's processes is left. */
async function stopAll(mesh: Mesh | undefined, nats: { stop(): Promise<void> } | undefined): Promise<void> {
  const pids = mesh?.supervisor.pids() ?? [];
  await mesh?.stop();
  await nats?.stop();
  expect(pids.filter(alive)).toEqual([]);
}

describe('jobs on a mesh of 4 rank agents', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  const lines: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    mesh = await startMesh({ agents: 4, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(() => stopAll(mesh, nats));

  afterEach(() => {
    // the mesh's output helps when a test fails; keep it bounded
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  });

  it('registers 4 agents with their backends (nccl unavailable here, with the reason)', async () => {
    const agents = await listAgents(mesh.client);
    expect(agents.map((a) => a.name).sort()).toEqual(['agent-0', 'agent-1', 'agent-2', 'agent-3']);
    for (const a of agents) {
      expect(a.alive).toBe(true);
      expect(a.backends).toMatch(/^tcp, nccl \(unavailable: .+\)$/);
    }
    const rec = (await mesh.client.get<{ agents: { name: string; httpUrl: string; pid: number }[] }>('/agents')).agents.find((a) => a.name === 'agent-1')!;
    const health = (await (await fetch(`${rec.httpUrl}/health`)).json()) as Record<string, unknown>;
    expect(health).toMatchObject({
      status: 'ok',
      name: 'agent-1',
      agentId: 'agent-1',
      pid: rec.pid,
      state: 'idle',
      backends: { tcp: { ok: true }, nccl: { ok: false } },
    });
  });

  it('runs a sweep over 4 agents with correct per-size results', async () => {
    const sizes = [64, 4096, 65536];
    const ar = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes, iters: 3, warmup: 1 })).id);
    expectCorrect(ar, sizes, 4);
    expect(ar.members.map((m) => [m.rank, m.name])).toEqual([
      [0, 'agent-0'],
      [1, 'agent-1'],
      [2, 'agent-2'],
      [3, 'agent-3'],
    ]);
    expect(ar.rows[1]).toMatchObject({ op: 'allReduce', count: 1024, type: 'float32', redop: 'sum', root: -1, backend: 'tcp' });
    // the agents export what they ran on their own /metrics (registered httpUrl)
    const rec = (await mesh.client.get<{ agents: { name: string; httpUrl?: string }[] }>('/agents')).agents.find((a) => a.name === 'agent-0')!;
    const text = await (await fetch(`${rec.httpUrl}/metrics`)).text();
    expect(text).toMatch(/^cmesh_collective_busbw_bytes_per_second\{[^}]*op="all_reduce"[^}]*size_class="65536"[^}]*\} [0-9.e+]+$/m);
    // a rooted op with a non-zero root, and a split one, over a chosen order of agents
    const bc = await mesh.client.waitJob(
      (await mesh.client.submitJob({ op: 'broadcast', sizes: [1024], iters: 2, warmup: 0, root: 2, agents: ['agent-3', 'agent-1', 'agent-0', 'agent-2'] })).id,
    );
    expectCorrect(bc, [1024], 4);
    expect(bc.rows[0].root).toBe(2);
    expect(bc.members.map((m) => m.name)).toEqual(['agent-3', 'agent-1', 'agent-0', 'agent-2']);
    const rs = await mesh.client.waitJob(
      (await mesh.client.submitJob({ op: 'reduceScatter', redop: 'max', dtype: 'int32', sizes: [4096], iters: 2, warmup: 0 })).id,
    );
    expectCorrect(rs, [4096], 4);
    expect(rs.rows[0]).toMatchObject({ count: 256, redop: 'max', type: 'int32' });
  }, 60_000);

  it('an agent sent a copy of the start of a job it ran (the coordinator lacks its samples) sends its samples and end again, and runs nothing', async () => {
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [64, 4096], iters: 2, warmup: 0, nranks: 2 })).id);
    expectCorrect(job, [64, 4096], 2);
    const names = clusterNames();
    const member = job.members[1];
    const nc = await connect({ servers: nats.url });
    try {
      const got: JobEvent[] = [];
      nc.subscribe(names.jobs.events(job.id, member.agentId), { callback: (_e, m) => void got.push(m.json<JobEvent>()) });
      await nc.flush();
      const copy = (jobId: string) =>
        JSON.stringify({ jobId, sweep: job.sweep, members: job.members, storePrefix: `jobs-${jobId}`, secret: 'copy-secret-0123456789abcdef', again: true });
      nc.publish(names.jobs.start(member.agentId), copy(job.id));
      for (const end = Date.now() + 10_000; !got.some((e) => e.type === 'done') && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
      expect(got.map((e) => [e.type, e.type === 'size' ? e.samples.requestedBytes : null])).toEqual([
        ['size', 64],
        ['size', 4096],
        ['done', null],
      ]);
      expect(got.every((e) => e.rank === member.rank && e.agentId === member.agentId)).toBe(true);
      // asked about a job it never ran (an agent restarted since), it starts nothing and says nothing
      const other: JobEvent[] = [];
      nc.subscribe(names.jobs.events('jnever', member.agentId), { callback: (_e, m) => void other.push(m.json<JobEvent>()) });
      nc.publish(names.jobs.start(member.agentId), copy('jnever'));
      await new Promise((r) => setTimeout(r, 1500));
      expect(other).toEqual([]);
      // nothing ran (no 'accepted' above), and the job's record is as it was
      expect((await mesh.client.job(job.id)).rows).toEqual(job.rows);
    } finally {
      await nc.close();
    }
  }, 60_000);

  it('runs two jobs on disjoint agents at once; a third on busy agents is refused or waits', async () => {
    // long enough (a second or more) to still be running when the third job comes
    const sizes = [256, 8192, 131072, 1048576];
    const j1 = await mesh.client.submitJob({ op: 'allReduce', sizes, iters: 200, warmup: 1, agents: ['agent-0', 'agent-1'] });
    const j2 = await mesh.client.submitJob({ op: 'allToAll', sizes, iters: 200, warmup: 1, agents: ['agent-2', 'agent-3'] });
    expect([j1.state, j2.state]).toEqual(['running', 'running']);
    await expect(mesh.client.submitJob({ op: 'allReduce', sizes: [8], agents: ['agent-1', 'agent-2'], onBusy: 'refuse' })).rejects.toThrow(
      /409 agents busy: agent-1 \(job j\w+\), agent-2/,
    );
    const j3 = await mesh.client.submitJob({ op: 'allReduce', sizes: [8], iters: 1, warmup: 0, agents: ['agent-1', 'agent-2'] });
    expect(j3.state).toBe('queued');
    const [r1, r2, r3] = await Promise.all([j1, j2, j3].map((j) => mesh.client.waitJob(j.id)));
    expectCorrect(r1, sizes, 2);
    expectCorrect(r2, sizes, 2);
    expectCorrect(r3, [8], 2);
    expect(Date.parse(r3.startedAt!)).toBeGreaterThanOrEqual(Math.max(Date.parse(r1.finishedAt!), Date.parse(r2.finishedAt!)) - 5);
  }, 60_000);

  it("a running job's workers answer the coordinator's flight recorder requests (GET /groups/{job or group id}/trace)", async () => {
    const group = (await (
      await fetch(`${mesh.coordinatorUrl}/groups`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ members: ['agent-3', 'agent-2'] }),
      })
    ).json()) as { id: string };
    const byId = await mesh.client.submitJob({ op: 'allReduce', sizes: [1048576], iters: 5000, warmup: 1, agents: ['agent-0', 'agent-1'] });
    const onGroup = await mesh.client.submitJob({ op: 'allReduce', sizes: [1048576], iters: 5000, warmup: 1, group: group.id });
    type Report = { answered: number; reports: { job: string; pg: string; ranks: number[] }[] };
    // by the job's id, and by the coordinator group's id (its running job's ranks)
    for (const [id, job] of [
      [byId.id, byId.id],
      [group.id, onGroup.id],
    ]) {
      let got: Report | undefined;
      for (let end = Date.now() + 30_000; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
        const res = await fetch(`${mesh.coordinatorUrl}/groups/${id}/trace`);
        if (res.status === 200) {
          got = (await res.json()) as Report;
          if (got.answered === 2) break;
        } else expect(res.status).toBe(404); // its workers are still joining
      }
      expect(got).toMatchObject({ answered: 2, reports: [{ job, pg: '0', ranks: [0, 1] }] });
    }
    for (const j of [byId, onGroup]) {
      expect((await fetch(`${mesh.coordinatorUrl}/jobs/${j.id}`, { method: 'DELETE' })).status).toBe(200);
      expect((await mesh.client.waitJob(j.id)).state).toBe('cancelled');
    }
  }, 90_000);

  it('a job asking for nccl fails with the reason, naming the agent', async () => {
    const job = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [64], backend: 'nccl', agents: ['agent-0', 'agent-1'] })).id);
    expect(job.state).toBe('failed');
    expect(job.reason).toMatch(/agent agent-[01] \(rank [01]\) failed: .*nccl unavailable/);
  }, 30_000);

  it('killing an agent mid-job fails the job within 5 s naming it; the others run the next job', async () => {
    const victim = mesh.supervisor.children.find((c) => c.name === 'agent-2')!;
    const sizes = Array.from({ length: 12 }, (_, i) => 1024 << i); // up to 2 MiB, many iterations
    const job = await mesh.client.submitJob({ op: 'allReduce', sizes, iters: 500, warmup: 2 }); // seconds of work: the kill lands mid-sweep
    // wait until it is under way (a row aggregated), then kill the agent by pid
    const deadline = Date.now() + 30_000;
    for (let j = job; ; ) {
      j = await mesh.client.job(job.id);
      if (j.progress.done >= 1 || j.state !== 'running' || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const workers = childrenOf(victim.proc.pid!);
    expect(workers.length).toBeGreaterThan(0);
    const t0 = Date.now();
    process.kill(victim.proc.pid!, 'SIGKILL');
    const failed = await mesh.client.waitJob(job.id, undefined, { pollMs: 20, timeoutMs: 10_000 });
    const took = Date.now() - t0;
    expect(failed.state).toBe('failed');
    expect(failed.failedAgent).toBe('agent-2');
    expect(failed.reason).toMatch(/agent agent-2 \(rank 2\)/);
    expect(took).toBeLessThan(5000);
    console.log(`job failed ${took} ms after agent-2 was killed: ${failed.reason}`);
    // the dead agent's job worker does not outlive it
    for (let i = 0; i < 50 && workers.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
    expect(workers.filter(alive)).toEqual([]);
    const next = await mesh.client.waitJob(
      (await mesh.client.submitJob({ op: 'allGather', sizes: [96, 3072], iters: 3, warmup: 1, agents: ['agent-0', 'agent-1', 'agent-3'] })).id,
    );
    expectCorrect(next, [96, 3072], 3);
    expect(next.members.map((m) => m.name)).toEqual(['agent-0', 'agent-1', 'agent-3']);
    // SIGTERM: the agent deregisters, stops its worker and exits
    const a3 = mesh.supervisor.children.find((c) => c.name === 'agent-3')!;
    const w3 = childrenOf(a3.proc.pid!);
    process.kill(a3.proc.pid!, 'SIGTERM');
    const end = await a3.exited;
    expect(end.code === 0 || end.signal === 'SIGTERM').toBe(true); // Nest re-raises the signal after its shutdown hooks
    expect((await listAgents(mesh.client)).map((a) => a.name)).not.toContain('agent-3');
    // its workers were killed and reaped before it exited: not even a zombie is left
    expect(w3.filter(alive)).toEqual([]);
  }, 90_000);
});

/** nats-server (JetStream on) refusing messages over maxPayload bytes; stopped by pid. */
async function startNatsServerWithMaxPayload(maxPayload: number): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'cmesh-nats-small-'));
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, `listen: "127.0.0.1:${port}"\nmax_payload: ${maxPayload}\njetstream { store_dir: "${join(dir, 'js')}" }\n`);
  const proc = spawn('nats-server', ['-c', conf], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null && proc.pid) process.kill(proc.pid, 'SIGTERM');
    const killer = setTimeout(() => proc.exitCode === null && proc.pid && process.kill(proc.pid, 'SIGKILL'), 3000);
    await exited;
    clearTimeout(killer);
    rmSync(dir, { recursive: true, force: true });
  };
  if (!(await waitForPort(port, 10_000, '127.0.0.1', () => proc.exitCode === null))) {
    await stop();
    throw new Error(`nats-server -c ${conf} did not start`);
  }
  return { url: `nats://127.0.0.1:${port}`, stop };
}

describe('an agent that cannot report its samples (nats-server max_payload 32 KiB)', () => {
  let nats: { url: string; stop(): Promise<void> };
  let mesh: Mesh;

  beforeAll(async () => {
    nats = await startNatsServerWithMaxPayload(32 * 1024);
    mesh = await startMesh({ agents: 1, natsUrl: nats.url, port: 0, write: () => undefined, readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(() => stopAll(mesh, nats));

  it('fails the job with the publish error instead of succeeding without rows; the agent runs the next job', async () => {
    // 2 modes x 2000 times of one size is ~80 KiB of JSON: more than this server takes
    const job = await mesh.client.waitJob(
      (await mesh.client.submitJob({ op: 'allReduce', agents: ['agent-0'], sizes: [8, 16], iters: 2000, warmup: 0 })).id,
      undefined,
      { timeoutMs: 30_000 },
    );
    expect(job.state).toBe('failed');
    expect(job.failedAgent).toBe('agent-0');
    expect(job.reason).toMatch(
      /^agent agent-0 \(rank 0\) failed: JobReportError: cannot report the samples of size 8 to the coordinator: 'payload' max_payload size exceeded$/,
    );
    expect([job.rows.length, job.progress]).toEqual([0, { done: 0, total: 2 }]);
    const next = await mesh.client.waitJob(
      (await mesh.client.submitJob({ op: 'allReduce', agents: ['agent-0'], sizes: [8, 16], iters: 3, warmup: 0 })).id,
      undefined,
      { timeoutMs: 30_000 },
    );
    expectCorrect(next, [8, 16], 1);
  }, 60_000);
});

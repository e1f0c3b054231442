// The agents' job workers are bound as `cmesh run` binds its workers (the library binds nothing on
// its own): two agents on one host run a job's two ranks, which busy-poll, so each worker's main
// thread gets a core of its own while its other threads keep every core; the same worker, reused
// for a job that is alone on the host, gets every core back, and reused again its process group
// names the job it runs now (each job's settings are its own); with CMESH_BIND=none on the agents
// nothing is bound. CMESH_METRICS_PORT on the agents: the workers export (the worker asks for it).
import { execFileSync } from 'child_process';
import { readFileSync, readdirSync } from 'fs';
import { NatsServer, freePort, freePortPair, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { cpusAllowed } from '@cmesh/collectives';

const STATUS = readFileSync('/proc/self/status', 'utf8');
const ALLOWED = cpusAllowed(STATUS);
const ALLOWED_TEXT = /^Cpus_allowed_list:\s*(.*)$/m.exec(STATUS)?.[1].trim();
const linux2 = process.platform === 'linux' && ALLOWED.length >= 2 ? describe : describe.skip;

const cpusOf = (path: string) => /^Cpus_allowed_list:\s*(.*)$/m.exec(readFileSync(path, 'utf8'))?.[1].trim();

/** The agent's job worker (its child running job-worker): main thread's CPUs and the other threads'. */
function worker(mesh: Mesh, agent: string): { pid: number; main: string | undefined; others: (string | undefined)[] } {
  const pid = mesh.supervisor.children.find((c) => c.name === agent)!.proc.pid!;
  let kids: number[] = [];
  try {
    kids = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    /* none */
  }
  const w = kids.filter((k) => readFileSync(`/proc/${k}/cmdline`, 'utf8').includes('job-worker'));
  expect(w).toHaveLength(1);
  const tasks = readdirSync(`/proc/${w[0]}/task`).filter((t) => t !== String(w[0]));
  return { pid: w[0], main: cpusOf(`/proc/${w[0]}/status`), others: tasks.map((t) => cpusOf(`/proc/${w[0]}/task/${t}/status`)) };
}

async function withMesh(env: Record<string, string>, fn: (mesh: Mesh) => Promise<void>): Promise<void> {
  const nats: NatsServer = await startNatsServer();
  let mesh: Mesh | undefined;
  // a range of its own for the data plane (the workers take the first free port in it)
  const lo = await freePort();
  const dataPorts = `${lo}-${Math.min(lo + 64, 65535)}`;
  try {
    mesh = await startMesh({
      agents: 2,
      natsUrl: nats.url,
      port: 0,
      write: () => undefined,
      readyTimeoutMs: 90_000,
      env: { CMESH_DATA_PORTS: dataPorts, ...env },
    });
    await fn(mesh);
  } finally {
    await mesh?.stop();
    await nats.stop();
  }
}

linux2('job workers bound like cmesh run binds', () => {
  it('each rank of a busy-polling job on a core of its own; every core back for a job alone on the host; each job its own id', async () => {
    await withMesh({ CMESH_SPIN_US: '' }, async (mesh) => {
      const job = await mesh.client.waitJob(
        (await mesh.client.submitJob({ op: 'allReduce', sizes: [64, 4096], iters: 3, warmup: 1, agents: ['agent-0', 'agent-1'] })).id,
      );
      expect(job.state).toBe('succeeded');
      // the workers stay, bound, as the spares for the next job
      const byRank = job.members.map((m) => worker(mesh, m.name));
      expect(byRank.map((w) => w.main)).toEqual([String(ALLOWED[0]), String(ALLOWED[1])]);
      for (const w of byRank) {
        expect(w.others.length).toBeGreaterThan(0);
        for (const o of w.others) expect(o).toBe(ALLOWED_TEXT);
      }
      const alone = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: [64], iters: 1, warmup: 0, agents: ['agent-1'] })).id);
      expect(alone.state).toBe('succeeded');
      expect(worker(mesh, 'agent-1')).toMatchObject({ pid: byRank[1].pid, main: ALLOWED_TEXT });
      // the same two workers run a third job: their flight recorder answers for it, not for the first
      const third = await mesh.client.submitJob({ op: 'allReduce', sizes: [1048576], iters: 5000, warmup: 1, agents: ['agent-0', 'agent-1'] });
      let got: { answered: number; reports: { job: string }[] } | undefined;
      for (let end = Date.now() + 30_000; Date.now() < end && got?.answered !== 2; await new Promise((r) => setTimeout(r, 200))) {
        const res = await fetch(`${mesh.coordinatorUrl}/groups/${third.id}/trace`);
        if (res.status === 200) got = (await res.json()) as typeof got;
      }
      expect(got).toMatchObject({ answered: 2, reports: [{ job: third.id }] });
      expect(job.members.map((m) => worker(mesh, m.name).pid)).toEqual(byRank.map((w) => w.pid));
      expect((await fetch(`${mesh.coordinatorUrl}/jobs/${third.id}`, { method: 'DELETE' })).status).toBe(200);
      expect((await mesh.client.waitJob(third.id)).state).toBe('cancelled');
    });
  }, 150_000);

  it('CMESH_BIND=none on the agents: not bound; CMESH_METRICS_PORT: each worker exports on port + LOCAL_RANK', async () => {
    // each worker exports on base + its LOCAL_RANK: both ports free
    const base = await freePortPair();
    await withMesh({ CMESH_BIND: 'none', CMESH_METRICS_PORT: String(base) }, async (mesh) => {
      const job = await mesh.client.waitJob(
        (await mesh.client.submitJob({ op: 'allReduce', sizes: [64], iters: 2, warmup: 0, agents: ['agent-0', 'agent-1'] })).id,
      );
      expect(job.state).toBe('succeeded');
      expect(['agent-0', 'agent-1'].map((a) => worker(mesh, a).main)).toEqual([ALLOWED_TEXT, ALLOWED_TEXT]);
      for (const port of [base, base + 1]) {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(text).toMatch(/^cmesh_collective_duration_seconds_count\{[^}]*op="all_reduce"[^}]*\} [1-9]/m);
      }
    });
  }, 150_000);
});

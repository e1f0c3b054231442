// `cmesh up --nats-cluster 3` as a user runs it, authentication on: three nats-servers on loopback
// form one JetStream cluster (every server sees the same meta leader, three peers, two routes,
// each logged in with the route login) and the mesh runs jobs on it; the SIGKILL of the server
// the coordinator is connected to leaves the mesh running jobs; a rolling restart of the three
// servers (lame duck, one at a time, each back and current before the next: the upgrade
// procedure of docs/operations.md) while jobs run one after another loses none and fails none;
// then, with a second coordinator replica, a rolling restart of the two replicas (SIGTERM, one at
// a time) while jobs run fails none either; Ctrl-C stops everything.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { randomUUID } from 'crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { createInterface } from 'readline';
import type { Readable } from 'stream';
import { freePort, markedPids } from '@cmesh/testing';
import { natsClusterSize } from '../src/commands/up';
import { nodeArgs, programOf } from '../src/programs';
import { setTimeout as sleep } from 'timers/promises';

const CMESH = join(__dirname, '../bin/cmesh.js');

interface Server {
  name: string;
  url: string;
  monitor: string;
  pidFile: string;
}

it('--nats-cluster takes 1 or an odd count, and not with --nats', () => {
  expect(natsClusterSize('1', undefined)).toBe(1);
  expect(natsClusterSize('3', undefined)).toBe(3);
  expect(() => natsClusterSize('2', undefined)).toThrow(/an odd count/);
  expect(() => natsClusterSize('0', undefined)).toThrow(/\[1, 7\]/);
  expect(() => natsClusterSize('3', 'nats://x:4222')).toThrow(/--nats uses one already running/);
});

describe('cmesh up --nats-cluster 3', () => {
  const marker = `upc-${process.pid}-${Date.now()}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'cmesh-upc-state-'));
  let up: ChildProcess | undefined;
  let out = '';
  /**
   * A stream's output into `out` a whole line at a time: `out` joins several pipes, and a chunk
   * of one ends mid-line whenever its writer got ahead (another pipe's chunk then split the line).
   */
  const collect = (stream: Readable, prefix = '') => createInterface({ input: stream }).on('line', (l) => (out += `${prefix}${l}\n`));

  afterAll(() => {
    // the mesh's output, for a failure's diagnosis
    if (process.env.CMESH_TEST_LOG) writeFileSync(process.env.CMESH_TEST_LOG, out);
    for (const pid of markedPids(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // ended between the listing and the kill
      }
    }
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('forms a JetStream cluster, runs jobs through the loss of a server and through rolling restarts of NATS and of the coordinator replicas, and stops on SIGINT', async () => {
    up = spawn(process.execPath, [CMESH, 'up', '--nats-cluster', '3', '--agents', '2', '--port', '0', '--nats-port', '0'], {
      env: { ...process.env, CMESH_TEST_MARK: marker, CMESH_STATE_DIR: stateDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    collect(up.stdout!);
    collect(up.stderr!);
    const exited = new Promise<number | null>((r) => up!.once('exit', (code) => r(code)));
    let url: string | undefined;
    for (const end = Date.now() + 120_000; !url && Date.now() < end && up.exitCode === null; await sleep(100))
      url = /mesh up: nats \S+, coordinator (http:\/\/\S+),/.exec(out)?.[1];
    if (!url) throw new Error(`cmesh up did not come up:\n${out.slice(-4000)}`);
    const servers: Server[] = [
      ...out.matchAll(/cmesh: (nats-\d): (nats:\/\/\S+), routes on port \d+, monitoring (http:\/\/\S+) \(\/healthz, \/jsz\), pid file (\S+)/g),
    ].map((m) => ({
      name: m[1],
      url: m[2],
      monitor: m[3],
      pidFile: m[4],
    }));
    expect(servers.map((s) => s.name)).toEqual(['nats-0', 'nats-1', 'nats-2']);
    // the coordinator and the agents were given all three
    expect(/mesh up: nats (\S+),/.exec(out)![1]).toBe(servers.map((s) => s.url).join(','));
    // the route password, like every secret, is the state directory's and private
    expect(statSync(join(stateDir, 'nats', 'cluster.route-password')).mode & 0o777).toBe(0o600);
    for (const s of servers) expect(statSync(join(s.pidFile, '..', `${s.name}.conf`)).mode & 0o777).toBe(0o600);

    const json = async <T>(u: string) => (await (await fetch(u, { signal: AbortSignal.timeout(5000) })).json()) as T;
    type Jsz = { meta_cluster?: { leader?: string; cluster_size?: number; replicas?: { name: string; current?: boolean; offline?: boolean }[] } };
    /** the meta leader once all three agree on it, all three answer /healthz and every peer is current */
    const clusterReady = async (within: number): Promise<string> => {
      let last = '';
      for (const end = Date.now() + within; Date.now() < end; await sleep(200)) {
        try {
          const metas = await Promise.all(servers.map((s) => json<Jsz>(`${s.monitor}/jsz`)));
          const health = await Promise.all(servers.map((s) => fetch(`${s.monitor}/healthz`).then((r) => r.status)));
          const leaders = new Set(metas.map((m) => m.meta_cluster?.leader));
          const lead = metas.find((m) => m.meta_cluster?.leader && m.meta_cluster.replicas && servers.some((s) => s.name === m.meta_cluster!.leader));
          const current = lead?.meta_cluster?.replicas?.every((r) => r.current && !r.offline);
          last = `leaders ${[...leaders].join(',')}, healthz ${health.join(',')}, peers current ${current}`;
          if (leaders.size === 1 && [...leaders][0] && health.every((h) => h === 200) && current && metas.every((m) => m.meta_cluster?.cluster_size === 3))
            return [...leaders][0]!;
        } catch (e) {
          last = (e as Error).message;
        }
      }
      throw new Error(`the NATS cluster is not whole within ${within} ms: ${last}`);
    };
    const leader = await clusterReady(30_000);
    expect(servers.map((s) => s.name)).toContain(leader);
    for (const s of servers) {
      const routez = await json<{ num_routes: number }>(`${s.monitor}/routez`);
      expect([s.name, routez.num_routes]).toEqual([s.name, 2]);
      const varz = await json<{ cluster: { name: string; port: number } }>(`${s.monitor}/varz`);
      expect(varz.cluster.name).toBe('cmesh');
    }

    const token = readFileSync(join(stateDir, 'api-token'), 'utf8').trim();
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const api = async <T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> => {
      const r = await fetch(`${url}${path}`, {
        method,
        headers: { ...headers, ...extra },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return JSON.parse(text) as T;
    };
    type Job = { id: string; state: string; reason?: string; rows: { outOfPlace: { wrong: number } | null }[] };
    // as a client should: a 503 (NATS failing over) is asked again, a submission under the same key
    const again = async <T>(call: () => Promise<T>, forMs: number): Promise<T> => {
      for (const end = Date.now() + forMs; ; await sleep(250)) {
        try {
          return await call();
        } catch (e) {
          if (!/: 503 /.test((e as Error).message) || Date.now() > end) throw e;
        }
      }
    };
    const runJob = async (): Promise<Job> => {
      const key = randomUUID();
      const { id } = await again(
        () => api<Job>('POST', '/jobs', { op: 'allReduce', sizes: [1024, 65536], iters: 2, warmup: 0 }, { 'idempotency-key': key }),
        20_000,
      );
      for (const end = Date.now() + 60_000; Date.now() < end; await sleep(100)) {
        const j = await again(() => api<Job>('GET', `/jobs/${id}`), 20_000);
        if (!['queued', 'running'].includes(j.state)) return j;
      }
      throw new Error(`job ${id} hung`);
    };
    const first = await runJob();
    expect([first.state, first.reason]).toEqual(['succeeded', undefined]);

    // the server the coordinator's connection is on dies: the coordinator moves to another
    const pidOf = (s: Server) => Number(readFileSync(s.pidFile, 'utf8').trim());
    const connz = await Promise.all(servers.map((s) => json<{ connections: { name?: string }[] }>(`${s.monitor}/connz?limit=1024`)));
    const victim = servers[connz.findIndex((c) => c.connections.some((x) => x.name?.startsWith('cmesh-coordinator-')))];
    expect(victim).toBeDefined();
    const victimPid = pidOf(victim);
    process.kill(victimPid, 'SIGKILL');
    // jobs submitted from the moment it dies: the first that succeeds, and what the others met
    // while JetStream moved the leaders that server held (a submission may fail; none may hang)
    const t0 = Date.now();
    const met: string[] = [];
    let during: Job | undefined;
    while (!during && Date.now() - t0 < 60_000) {
      try {
        const j = await runJob();
        if (j.state === 'succeeded') during = j;
        else met.push(`job ${j.state}: ${j.reason}`);
      } catch (e) {
        met.push((e as Error).message);
      }
    }
    const failoverMs = Date.now() - t0;
    process.stdout.write(`first job through the SIGKILL of ${victim.name}: ${failoverMs} ms after it${met.length ? `; before it: ${met.join(' | ')}` : ''}\n`);
    expect(during).toBeDefined();
    // `cmesh up` starts it again on its ports and store, and it rejoins
    for (const end = Date.now() + 30_000; Date.now() < end; await sleep(100)) {
      try {
        if (pidOf(victim) !== victimPid) break;
      } catch {
        /* the pid file is written as it starts */
      }
    }
    expect(out).toMatch(new RegExp(`\\[${victim.name}\\] +exited with SIGKILL; restarting it`));
    await clusterReady(60_000);

    // rolling restart, jobs running one after another the whole time
    let rolling = true;
    const jobs: Job[] = [];
    const loop = (async () => {
      while (rolling) jobs.push(await runJob());
    })();
    for (const s of servers) {
      const pid = pidOf(s);
      const ldm = spawnSync('nats-server', ['--signal', `ldm=${s.pidFile}`], { encoding: 'utf8', timeout: 10_000 });
      expect([s.name, ldm.status, ldm.stderr]).toEqual([s.name, 0, '']);
      for (const end = Date.now() + 60_000; Date.now() < end; await sleep(200)) {
        try {
          if (pidOf(s) !== pid) break;
        } catch {
          /* being written */
        }
      }
      expect([s.name, pidOf(s) !== pid]).toEqual([s.name, true]);
      await clusterReady(60_000);
    }
    rolling = false;
    await loop;
    const failed = jobs.filter((j) => j.state !== 'succeeded');
    process.stdout.write(
      `rolling restart of 3 NATS servers: ${jobs.length} jobs, ${failed.length ? `${failed.length} failed: ${failed.map((j) => j.reason).join('; ')}` : 'all succeeded'}\n`,
    );

    // a second coordinator replica (as the first, another port), then a rolling restart of the two
    // (SIGTERM, one at a time, each serving again before the next) while jobs run: a stopping
    // replica takes no new job (503: the client submits to the other) and lets its jobs finish
    // a listed process may have exited before its cmdline is read
    const cmdline = (pid: number) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        return '';
      }
    };
    // the coordinator's entry as the launcher starts it (sources through swc, or dist/ under CMESH_PROGRAMS=dist)
    const coordinatorPid = () => markedPids(marker).find((p) => cmdline(p).includes(programOf('@cmesh/coordinator', 'main')))!;
    const envOf = (pid: number) =>
      Object.fromEntries(
        readFileSync(`/proc/${pid}/environ`, 'utf8')
          .split('\0')
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      );
    const a = coordinatorPid();
    const envA = envOf(a);
    const bPort = await freePort();
    const urlB = `http://127.0.0.1:${bPort}`;
    const startB = () => {
      const p = spawn(process.execPath, nodeArgs(programOf('@cmesh/coordinator', 'main')), {
        env: { ...envA, HTTP_PORT: String(bPort), CMESH_REPLICA_ID: `b-${process.pid}` },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      collect(p.stdout!, '[coordinator-b] ');
      collect(p.stderr!, '[coordinator-b] ');
      return p;
    };
    const serving = async (base: string, within: number) => {
      for (const end = Date.now() + within; Date.now() < end; await sleep(200))
        if (
          await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) }).then(
            (r) => r.ok,
            () => false,
          )
        )
          return;
      throw new Error(`${base} not serving within ${within} ms`);
    };
    let b = startB();
    await serving(urlB, 60_000);
    const replicas = [url, urlB];
    /** submit to the first replica that takes it; follow the job through any replica (the records are in KV) */
    const runJobAnywhere = async (): Promise<Job> => {
      let id: string | undefined;
      const refused: string[] = [];
      for (const end = Date.now() + 60_000; !id && Date.now() < end; await sleep(100)) {
        for (const base of replicas) {
          try {
            const r = await fetch(`${base}/jobs`, {
              method: 'POST',
              headers,
              body: JSON.stringify({ op: 'allReduce', sizes: [1024, 65536], iters: 2, warmup: 0 }),
              signal: AbortSignal.timeout(30_000),
            });
            if (r.ok) {
              id = ((await r.json()) as Job).id;
              break;
            }
            refused.push(`${base} ${r.status}`);
          } catch (e) {
            refused.push(`${base} ${(e as Error).message}`);
          }
        }
      }
      if (!id) throw new Error(`no replica took the job: ${refused.join(', ')}`);
      for (const end = Date.now() + 90_000; Date.now() < end; await sleep(100)) {
        for (const base of replicas) {
          const j = await fetch(`${base}/jobs/${id}`, { headers, signal: AbortSignal.timeout(5000) }).then(
            (r) => (r.ok ? (r.json() as Promise<Job>) : undefined),
            () => undefined,
          );
          if (j && !['queued', 'running'].includes(j.state)) return j;
          if (j) break;
        }
      }
      throw new Error(`job ${id} hung`);
    };
    rolling = true;
    const coordinatorJobs: Job[] = [];
    const loop2 = (async () => {
      while (rolling) coordinatorJobs.push(await runJobAnywhere());
    })();
    await sleep(1500);
    // the first replica (cmesh up restarts it), then the second
    process.kill(a, 'SIGTERM');
    // its stop is bounded by 35 s (the jobs' grace and the rest), then cmesh up starts it again.
    // Waited for by its own pid: replica b carries the same test mark, so "another coordinator
    // pid" may be b's while a is still stopping (and still answering /health)
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (const end = Date.now() + 60_000; alive(a) && Date.now() < end; ) await sleep(200);
    expect(alive(a)).toBe(false);
    await serving(url!, 90_000);
    await sleep(1500);
    const bExit = new Promise((r) => b.once('exit', r));
    b.kill('SIGTERM');
    await bExit;
    b = startB();
    await serving(urlB, 60_000);
    await sleep(1500);
    rolling = false;
    await loop2;
    b.kill('SIGTERM');
    await new Promise((r) => b.once('exit', r));
    expect(out).toMatch(/\[nats-2\] +exited with code 0; restarting it/);
    expect(jobs.length).toBeGreaterThanOrEqual(3);
    // NATS is at most once: a job whose messages were in flight on a server as it restarted may
    // fail, but only for a reason NATS can cause, and most go through; none is lost or hangs
    const failedJobs = jobs.filter((j) => j.state !== 'succeeded').map((j) => `${j.id} ${j.state} ${j.reason}`);
    expect(failedJobs.filter((f) => !/jetstream|\bnats\b|\bkv\b|bucket|timeout|no message for|did not accept|connection|store/i.test(f))).toEqual([]);
    expect(failedJobs.length).toBeLessThanOrEqual(Math.floor(jobs.length / 4));
    for (const j of jobs.filter((x) => x.state === 'succeeded')) expect(j.rows.every((r) => r.outOfPlace?.wrong === 0)).toBe(true);
    // nothing lost: every job is still in the cluster's records (KV, R3), as it ended
    const all = [first, during!, ...jobs, ...coordinatorJobs];
    const records = await Promise.all(all.map((j) => api<Job>('GET', `/jobs/${j.id}`).catch((e: Error) => ({ id: j.id, state: e.message, rows: [] }) as Job)));
    expect(records.map((r) => `${r.id} ${r.state}`)).toEqual(all.map((j) => `${j.id} ${j.state}`));
    // the supervisor's lines about replica a (not the whole log: a mismatch must say what a did)
    const aExits = out.split('\n').filter((l) => /^\[coordinator\] .*(exited|did not stop|fatal|failed)/.test(l));
    expect(aExits.join('\n')).toMatch(/\[coordinator\] +exited with (code 0|SIGTERM); restarting it/);
    expect(coordinatorJobs.length).toBeGreaterThanOrEqual(3);
    expect(coordinatorJobs.filter((j) => j.state !== 'succeeded').map((j) => `${j.id} ${j.state} ${j.reason}`)).toEqual([]);
    process.stdout.write(`rolling restart of 2 coordinator replicas: ${coordinatorJobs.length} jobs, all succeeded\n`);

    expect(up.exitCode).toBeNull();
    up.kill('SIGINT');
    expect(await exited).toBe(0);
    await sleep(200);
    expect(markedPids(marker)).toEqual([]);
  }, 400_000);
});

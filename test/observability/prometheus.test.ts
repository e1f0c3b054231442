// A real Prometheus (Debian binary) scrapes a real mesh (nats-server, the coordinator, 2 rank
// agents) and a plain `cmesh run` job exporting its collectives (CMESH_METRICS_PORT). The busbw
// and duration series read back through Prometheus' HTTP API must match what the coordinator
// reported for the job; service group members' ops appear on their agents by group name; every
// series carries the cluster label; every PromQL expression of the Grafana dashboard and of the
// rules must return data; the alerts (agent lost, heartbeat late, scrape down, busbw floor,
// errors, rejected messages; NATS down, as nothing scrapes NATS here) must go active once an
// agent is killed mid-job and a malformed message arrives, and the coordinator-down alert must not.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';
import { connect } from '@nats-io/transport-node';
import { JobRecord, RDZV_SUBJECTS, ScanRecord } from '@cmesh/protocol';
import { NatsServer, Prometheus, Sample, freePortPair, isAlive, sampleValue, startNatsServer, startPrometheus } from '@cmesh/testing';
import { Mesh, startMesh, nodeArgs, programEnv } from '@cmesh/testing/mesh';
import { dashboardExpressions, ruleFileRules } from './support/expressions';

const ROOT = resolve(__dirname, '../..');
const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');
const RULES = join(ROOT, 'dashboards/prometheus/rules/cmesh.rules.yml');
const SIZES = [1024, 1 << 20];
const ITERS = 5;

const finite = (s: Sample[]) => s.some((x) => Number.isFinite(sampleValue(x)));

/** A service group member (fixtures/service-member.ts) and the JSON lines it prints. */
function serviceMember(env: Record<string, string>): {
  proc: ChildProcess;
  lines: Record<string, unknown>[];
  out: string[];
  waitFor(event: string, ms: number): Promise<Record<string, unknown>>;
} {
  const proc = spawn(process.execPath, nodeArgs(join(__dirname, 'fixtures/service-member.ts')), {
    cwd: ROOT,
    env: { ...process.env, ...programEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const out: string[] = [];
  proc.stdout!.on('data', (d: Buffer) => {
    for (const l of d.toString().split('\n').filter(Boolean)) {
      if (l.startsWith('{')) lines.push(JSON.parse(l) as Record<string, unknown>);
      else out.push(l);
    }
  });
  proc.stderr!.on('data', (d: Buffer) => out.push(d.toString()));
  const waitFor = async (event: string, ms: number) => {
    for (const end = Date.now() + ms; ; await new Promise((r) => setTimeout(r, 50))) {
      const l = lines.find((x) => x.event === event);
      if (l) return l;
      if (Date.now() > end) throw new Error(`no ${event} within ${ms} ms: ${JSON.stringify(lines)} ${out.join('').slice(-2000)}`);
    }
  };
  return { proc, lines, out, waitFor };
}
const hostPort = (url: string) => new URL(url).host;

describe('Prometheus scraping the mesh and a cmesh run job', () => {
  let nats: NatsServer;
  let mesh: Mesh;
  let prom: Prometheus;
  let job: ChildProcess | undefined;
  let jobExit: Promise<number | null>;
  const jobOut: string[] = [];
  const meshOut: string[] = [];
  const tmp = mkdtempSync(join(tmpdir(), 'cmesh-obs-'));
  const stopFile = join(tmp, 'stop');
  let jobPorts: number;
  let agentUrls: Record<string, string> = {};
  let good: JobRecord;
  const members: ChildProcess[] = [];
  let loopMember: ChildProcess | undefined;

  beforeAll(async () => {
    // the busbw floor is the operator's; raised here so the alert has to fire on this machine
    const rules = readFileSync(RULES, 'utf8');
    // and the stuck-collective bound lowered to every rank's age (0 when nothing is in flight)
    // and the scans' slow-agent ratio raised above any agent's (1 on a healthy loopback mesh)
    const raised = rules
      .replace(/< 1e9 # busbw-floor/, '< 1e18 # busbw-floor')
      .replace(/> 300 # stuck-after/, '>= 0 # stuck-after')
      .replace(/\) < 0\.5\n(.*)\) < 0\.5 # scan-ratio/, ') < 1e9\n$1) < 1e9 # scan-ratio');
    expect(raised).toMatch(/< 1e9 # scan-ratio/);
    expect(raised).not.toBe(rules);
    expect(raised).toMatch(/>= 0 # stuck-after/);
    writeFileSync(join(tmp, 'cmesh.rules.yml'), raised);

    nats = await startNatsServer();
    jobPorts = await freePortPair();
    job = spawn(process.execPath, [CMESH, 'run', '--standalone', '--nproc-per-node', '2', join(__dirname, 'fixtures/allreduce-loop.ts')], {
      cwd: ROOT,
      env: { ...process.env, CMESH_METRICS_PORT: String(jobPorts), CMESH_STOP_FILE: stopFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    job.stdout!.on('data', (d) => jobOut.push(String(d)));
    job.stderr!.on('data', (d) => jobOut.push(String(d)));
    jobExit = new Promise((r) => job!.once('exit', (code) => r(code)));
    const [m, p] = await Promise.all([
      startMesh({ agents: 2, natsUrl: nats.url, port: 0, write: (l) => meshOut.push(l), readyTimeoutMs: 90_000 }),
      startPrometheus({ interval: '1s', ruleFiles: [join(tmp, 'cmesh.rules.yml')] }),
    ]);
    mesh = m;
    prom = p;
    const agents = (await mesh.client.get<{ agents: { name: string; httpUrl?: string }[] }>('/agents')).agents;
    agentUrls = Object.fromEntries(agents.map((a) => [a.name, a.httpUrl!]));
    expect(Object.keys(agentUrls).sort()).toEqual(['agent-0', 'agent-1']);
    await prom.setJobs([
      { job: 'cmesh-coordinator', targets: [hostPort(mesh.coordinatorUrl)] },
      { job: 'cmesh-agent', targets: Object.values(agentUrls).map(hostPort) },
      { job: 'cmesh-job', targets: [`127.0.0.1:${jobPorts}`, `127.0.0.1:${jobPorts + 1}`] },
    ]);
  }, 150_000);

  afterAll(async () => {
    // clean up first, whatever happened; check afterwards
    let code: number | null = 0;
    writeFileSync(stopFile, '');
    if (job && job.exitCode === null) {
      // the ranks stop together on the file; else the launcher is told to stop them (SIGTERM), then killed
      const term = setTimeout(() => job!.pid && isAlive(job!.pid) && process.kill(job!.pid, 'SIGTERM'), 10_000);
      const kill = setTimeout(() => job!.pid && isAlive(job!.pid) && process.kill(job!.pid, 'SIGKILL'), 20_000);
      code = await jobExit;
      clearTimeout(term);
      clearTimeout(kill);
    }
    // the looping service member leaves on the stop file too (else it is killed); the others are killed
    let loopCode: number | null = 0;
    for (const m of members) {
      if (m.exitCode !== null || m.signalCode !== null) continue;
      const exited = new Promise<number | null>((r) => m.once('exit', (code) => r(code)));
      const kill = setTimeout(() => m.kill('SIGKILL'), m === loopMember ? 10_000 : 0);
      const code = await exited;
      clearTimeout(kill);
      if (m === loopMember) loopCode = code;
    }
    const pids = mesh?.supervisor.pids() ?? [];
    await mesh?.stop();
    await prom?.stop();
    await nats?.stop();
    rmSync(tmp, { recursive: true, force: true });
    expect(pids.filter(isAlive)).toEqual([]);
    // the job ended on its own, promptly, though Prometheus kept scraping it
    if (job) expect([code, jobOut.join('')]).toEqual([0, expect.stringMatching(/rank 0: \d+ iterations/)]);
    expect(loopCode).toBe(0);
  }, 60_000);

  it('scrapes the coordinator, both agents and both ranks of the job', async () => {
    const up = await prom.waitFor('up == 1', 30_000, (s) => s.length === 5);
    expect(up.map((s) => `${s.metric.job} ${s.metric.instance}`).sort()).toEqual(
      [
        `cmesh-agent ${hostPort(agentUrls['agent-0'])}`,
        `cmesh-agent ${hostPort(agentUrls['agent-1'])}`,
        `cmesh-coordinator ${hostPort(mesh.coordinatorUrl)}`,
        `cmesh-job 127.0.0.1:${jobPorts}`,
        `cmesh-job 127.0.0.1:${jobPorts + 1}`,
      ].sort(),
    );
    // every endpoint's exposition passes promtool's lint for the cmesh_ metrics (prom-client's own
    // nodejs_* defaults are not ours to rename)
    for (const u of up) {
      const text = await (await fetch(`http://${u.metric.instance}/metrics`)).text();
      expect(text).toMatch(/^# HELP cmesh_/m);
      const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      const ours = (lint.stdout + lint.stderr).split('\n').filter((l) => l.startsWith('cmesh_'));
      expect([u.metric.job, ours]).toEqual([u.metric.job, []]);
    }
    // the default process metrics too
    expect(await prom.waitFor('process_resident_memory_bytes{job=~"cmesh-(coordinator|agent)"} > 0', 10_000, (s) => s.length === 3)).toHaveLength(3);
    // every series of every target names its cluster (CMESH_CLUSTER; the default here)
    const unlabelled = await prom.query('group by (job, __name__) ({job=~"cmesh-.*", __name__!~"up|scrape_.*", cluster!="default"})');
    expect(unlabelled.map((s) => `${s.metric.job} ${s.metric.__name__}`)).toEqual([]);
    expect((await prom.query('count by (job) ({job=~"cmesh-.*", __name__!~"up|scrape_.*", cluster="default"})')).map((s) => s.metric.job).sort()).toEqual([
      'cmesh-agent',
      'cmesh-coordinator',
      'cmesh-job',
    ]);
    // what the dashboard's job variables find: the coordinator and the agents by their component
    const info = await prom.query('cmesh_component_info');
    expect(info.map((s) => `${s.metric.job} ${s.metric.component}`).sort()).toEqual([
      'cmesh-agent agent',
      'cmesh-agent agent',
      'cmesh-coordinator coordinator',
    ]);
  }, 60_000);

  it('reads back the busbw and duration series of a mesh job through the HTTP API', async () => {
    good = await mesh.client.waitJob((await mesh.client.submitJob({ op: 'allReduce', sizes: SIZES, iters: ITERS, warmup: 1 })).id, undefined, {
      timeoutMs: 60_000,
    });
    expect(good.state).toBe('succeeded');
    expect(good.rows.map((r) => r.bytes)).toEqual(SIZES);
    for (const row of good.rows) {
      const m = row.outOfPlace!;
      // powers of two: each size its own class
      const sel = `{job="cmesh-coordinator",cluster="default",op="all_reduce",backend="tcp",dtype="float32",size_class="${row.bytes}"}`;
      const busbw = await prom.waitFor(`cmesh_collective_busbw_bytes_per_second${sel}`, 15_000);
      expect(busbw).toHaveLength(1);
      // the coordinator exports the out-of-place measurement of each row, in bytes per second
      expect(sampleValue(busbw[0])).toBeCloseTo(m.busBwGBs * 1e9, -1);
      const algbw = await prom.query(`cmesh_collective_algbw_bytes_per_second${sel}`);
      expect(sampleValue(algbw[0])).toBeCloseTo(m.algBwGBs * 1e9, -1);
      expect(sampleValue(busbw[0]) / sampleValue(algbw[0])).toBeCloseTo(1, 9); // 2(n-1)/n at n = 2
    }
    // the coordinator observed one duration per row; each agent one per timed iteration
    const coord = await prom.waitFor(
      'sum(cmesh_collective_duration_seconds_count{job="cmesh-coordinator",op="all_reduce"})',
      15_000,
      (s) => sampleValue(s[0] ?? { metric: {}, value: [0, '0'] }) === SIZES.length,
    );
    expect(sampleValue(coord[0])).toBe(SIZES.length);
    const perAgent = await prom.waitFor(
      'sum by (instance) (cmesh_collective_duration_seconds_count{job="cmesh-agent",op="all_reduce",backend="tcp"})',
      15_000,
      (s) => s.length === 2 && s.every((x) => sampleValue(x) === ITERS * 2 * SIZES.length),
    );
    expect(perAgent.map(sampleValue)).toEqual([ITERS * 2 * SIZES.length, ITERS * 2 * SIZES.length]);
    // size buckets are bounded powers of four: 1 KiB -> "1024", 1 MiB -> "1048576"
    const buckets = await prom.query('count by (size_bucket) (cmesh_collective_duration_seconds_count{job="cmesh-agent"})');
    expect(buckets.map((s) => s.metric.size_bucket).sort()).toEqual(['1024', '1048576']);
    // each agent's own busbw for both sizes, and the tensor bytes it ran on
    const agentBw = await prom.waitFor('cmesh_collective_busbw_bytes_per_second{job="cmesh-agent",op="all_reduce"} > 0', 15_000, (s) => s.length === 4);
    expect(agentBw).toHaveLength(4);
    // no raw size in any label: the bandwidth gauges carry size classes
    expect([...new Set(agentBw.map((s) => s.metric.size_class))].sort()).toEqual(['1024', '1048576']);
    expect(await prom.query('count({size_bytes!=""})')).toEqual([]);
    const payload = await prom.waitFor('cmesh_collective_payload_bytes_total{job="cmesh-agent",op="all_reduce"}', 15_000, (s) => s.length === 2);
    const expected = SIZES.reduce((a, b) => a + b, 0) * ITERS * 2;
    expect(payload.map(sampleValue)).toEqual([expected, expected]);
    // and the bytes it put on the wire: at world 2 every all-reduce algorithm sends and receives
    // at least the tensor per call (warm-up and checks come on top)
    for (const direction of ['sent', 'received']) {
      const wire = await prom.waitFor(
        `cmesh_collective_bytes_total{job="cmesh-agent",op="all_reduce",direction="${direction}"}`,
        15_000,
        (s) => s.length === 2,
      );
      for (const w of wire) expect(sampleValue(w)).toBeGreaterThanOrEqual(expected);
    }
  }, 90_000);

  it("exports service group ops on the members' agents by group name: latency, bytes, bus bytes, failures", async () => {
    // rank 0 (agent-0, the first idle agent by name) joins first: its op times out there
    const env = { NATS_URL: nats.url, GROUP: 'prom-svc', SIZE: '2' };
    const first = serviceMember({ ...env, LABEL: 'first', MODE: 'timeout' });
    members.push(first.proc);
    for (let end = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 50))) {
      const { groups } = await mesh.client.get<{ groups: { name: string; joined: number }[] }>('/service-groups');
      if (groups.some((g) => g.name === 'prom-svc' && g.joined === 1)) break;
      if (Date.now() > end) throw new Error(`prom-svc: no member joined: ${first.out.join('')}`);
    }
    const second = serviceMember({ ...env, LABEL: 'second', MODE: 'wait' });
    members.push(second.proc);
    expect(await first.waitFor('joined', 90_000)).toMatchObject({ rank: 0, agent: 'agent-0' });
    expect(await second.waitFor('joined', 90_000)).toMatchObject({ rank: 1, agent: 'agent-1' });
    expect(await first.waitFor('failed', 60_000)).toMatchObject({ code: 'TIMEOUT' });
    second.proc.kill('SIGKILL');

    // 3 all-reduces of 4000 B per agent; the bus factor is 1 at 2 ranks
    const sel = '{job="cmesh-agent",group="prom-svc",op="all_reduce",dtype="float32"}';
    const bytes = await prom.waitFor(`cmesh_service_op_bytes_total${sel}`, 15_000, (s) => s.length === 2);
    expect(bytes.map(sampleValue)).toEqual([12_000, 12_000]);
    const bus = await prom.waitFor(`cmesh_service_op_bus_bytes_total${sel}`, 15_000, (s) => s.length === 2);
    expect(bus.map(sampleValue)).toEqual([12_000, 12_000]);
    const calls = await prom.query(`cmesh_service_op_duration_seconds_count${sel}`);
    expect(calls.map(sampleValue)).toEqual([3, 3]);
    // busbw as the dashboard derives it (bus bytes over the ops' time), without rate()
    const busbw = await prom.query(`cmesh_service_op_bus_bytes_total${sel} / cmesh_service_op_duration_seconds_sum${sel}`);
    expect(busbw).toHaveLength(2);
    for (const b of busbw) expect(sampleValue(b)).toBeGreaterThan(0);
    const failed = await prom.waitFor('cmesh_service_op_errors_total{job="cmesh-agent",group="prom-svc",op="all_reduce",reason="TIMEOUT"}', 15_000);
    expect(failed.map((s) => [s.metric.instance, sampleValue(s)])).toEqual([[hostPort(agentUrls['agent-0']), 1]]);
  }, 150_000);

  it("exports two fabric scans of the agents (each agent's ratio now and in the scan before)", async () => {
    for (let i = 0; i < 2; i++) {
      let scan = await mesh.client.post<ScanRecord>('/scans', { bandwidthBytes: 65536, iters: 2, warmup: 0 });
      for (const end = Date.now() + 60_000; scan.state === 'running' && Date.now() < end; ) {
        await new Promise((r) => setTimeout(r, 100));
        scan = await mesh.client.get<ScanRecord>(`/scans/${scan.id}`);
      }
      expect([scan.state, scan.links.map((l) => l.state)]).toEqual(['succeeded', ['ok']]);
    }
    const prev = await prom.waitFor('cmesh_scan_agent_previous_bandwidth_ratio{job="cmesh-coordinator"}', 15_000, (s) => s.length === 2);
    expect(prev.map((s) => s.metric.agent).sort()).toEqual(['agent-0', 'agent-1']);
  }, 150_000);

  it("exports every rank's oldest in-flight collective age (flight recorder), labelled with its rank", async () => {
    const age = await prom.waitFor('cmesh_collective_oldest_inflight_age_seconds{job="cmesh-job"}', 30_000, (s) => s.length === 2);
    expect(age.map((s) => s.metric.rank).sort()).toEqual(['0', '1']);
    // the ranks loop with 25 ms pauses: whatever a scrape catches in flight is young
    for (const s of age) expect(sampleValue(s)).toBeLessThan(10);
  }, 60_000);

  it("exports every rank's collectives of the cmesh run job (library exporter)", async () => {
    const calls = await prom.waitFor(
      'sum by (instance) (cmesh_collective_duration_seconds_count{job="cmesh-job",op="all_reduce"}) > 0',
      30_000,
      (s) => s.length === 2,
    );
    expect(calls).toHaveLength(2);
    const sent = await prom.waitFor(
      'rate(cmesh_collective_bytes_total{job="cmesh-job",op="all_reduce",direction="sent"}[30s]) > 0',
      30_000,
      (s) => s.length === 2,
    );
    expect(sent.map((s) => s.metric.instance).sort()).toEqual([`127.0.0.1:${jobPorts}`, `127.0.0.1:${jobPorts + 1}`].sort());
    const p50 = await prom.waitFor(
      'histogram_quantile(0.5, sum by (le) (rate(cmesh_collective_duration_seconds_bucket{job="cmesh-job",op="all_reduce"}[30s])))',
      30_000,
      finite,
    );
    expect(sampleValue(p50[0])).toBeGreaterThan(0);
    expect(sampleValue(p50[0])).toBeLessThan(1);
  }, 60_000);

  it('a rendezvous round and a failing job: the coordinator counts both, the alerts go active', async () => {
    // a c10d round of two nodes through the coordinator
    const nc = await connect({ servers: nats.url });
    try {
      const join = (nodeId: string) =>
        nc.request(RDZV_SUBJECTS.join, JSON.stringify({ runId: 'obs', nodeId, minNodes: 2, maxNodes: 2, lastCallMs: 0 }), { timeout: 10_000 });
      await Promise.all([join('n0'), join('n1')]);
      // a message the coordinator cannot read: counted in cmesh_rejected_messages_total
      nc.publish(RDZV_SUBJECTS.join, 'not json');
      await nc.flush();
    } finally {
      await nc.close();
    }
    await prom.waitFor('cmesh_rendezvous_duration_seconds_count{job="cmesh-coordinator"} >= 1', 15_000);

    // kill agent-1 while a sweep runs: the job fails (an error on the coordinator and on agent-0).
    // Another op than the good sweep's, whose busbw series (the last all_reduce sweep) stay.
    const victim = mesh.supervisor.children.find((c) => c.name === 'agent-1')!;
    const sizes = Array.from({ length: 10 }, (_, i) => 4096 << i);
    // (500 iterations: seconds of work, so the kill lands mid-sweep however fast the data plane is)
    const running = await mesh.client.submitJob({ op: 'allGather', sizes, iters: 500, warmup: 1 });
    for (let j = running, end = Date.now() + 30_000; j.progress.done < 1 && j.state === 'running' && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 20));
      j = await mesh.client.job(running.id);
    }
    process.kill(victim.proc.pid!, 'SIGKILL');
    const failed = await mesh.client.waitJob(running.id, undefined, { timeoutMs: 15_000 });
    expect(failed.state).toBe('failed');
    const errs = await prom.waitFor('sum by (job, reason) (cmesh_collective_errors_total{op="all_gather"})', 20_000, (s) =>
      s.some((x) => x.metric.job === 'cmesh-coordinator'),
    );
    expect(errs.find((x) => x.metric.job === 'cmesh-coordinator')!.metric.reason).toBe('agent_lost');
    expect(await prom.waitFor('cmesh_agents{state="lost"} == 1', 20_000)).toHaveLength(1);

    await prom.waitFor('cmesh_rejected_messages_total{job="cmesh-coordinator",reason="not_json"} >= 1', 20_000);

    // every alert but the coordinator's: it is up
    const want = [
      'CmeshNatsDown',
      'CmeshAgentLost',
      'CmeshAgentHeartbeatLate',
      'CmeshAgentScrapeDown',
      'CmeshBusbwBelowFloor',
      'CmeshCollectiveErrors',
      'CmeshCollectiveStuck',
      'CmeshAgentSlowInScans',
      'CmeshRejectedMessages',
    ];
    const end = Date.now() + 30_000;
    let alerts: Awaited<ReturnType<Prometheus['rules']>> = [];
    for (;;) {
      alerts = (await prom.rules()).filter((r) => r.type === 'alerting');
      const active = alerts.filter((a) => a.state === 'pending' || a.state === 'firing').map((a) => a.name);
      if (want.every((w) => active.includes(w)) || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(alerts.map((a) => [a.name, a.health, a.state === 'pending' || a.state === 'firing'])).toEqual(
      ['CmeshCoordinatorDown', ...want].map((w) => [w, 'ok', w !== 'CmeshCoordinatorDown']),
    );
  }, 120_000);

  it('every rule is healthy and every recording rule and alert expression returns data', async () => {
    const loaded = await prom.rules();
    const inFile = ruleFileRules(readFileSync(RULES, 'utf8'));
    expect(loaded.map((r) => r.name).sort()).toEqual(inFile.map((r) => r.name).sort());
    for (const r of loaded) expect([r.name, r.health, r.lastError ?? '']).toEqual([r.name, 'ok', '']);
    for (const r of inFile) {
      // the coordinator is up: its outage alert has nothing to say
      if (r.name === 'CmeshCoordinatorDown') {
        expect(await prom.query(r.expr)).toEqual([]);
        continue;
      }
      const expr = r.expr
        .replace('< 1e9', '< 1e18')
        .replace('> 300', '>= 0')
        .replace(/< 0\.5/g, '< 1e9');
      const s = await prom.waitFor(expr, 20_000, r.kind === 'record' ? finite : (x) => x.length > 0).catch((e: Error) => {
        throw new Error(`${r.name}: ${e.message}`);
      });
      expect([r.name, s.length > 0]).toEqual([r.name, true]);
    }
  }, 120_000);

  it('every PromQL expression of the Grafana dashboard returns data', async () => {
    // a group of 1 on agent-0 (the agent that stays up) runs until the end, so the dashboard's
    // service panels have fresh rates (started only now: agents serving a group take no job or scan)
    const loop = serviceMember({ NATS_URL: nats.url, GROUP: 'prom-loop', SIZE: '1', LABEL: 'loop', MODE: 'loop', CMESH_STOP_FILE: stopFile });
    members.push(loop.proc);
    loopMember = loop.proc;
    expect(await loop.waitFor('joined', 90_000)).toMatchObject({ rank: 0, agent: 'agent-0' });
    await prom.waitFor('cmesh_service_op_duration_seconds_count{job="cmesh-agent",group="prom-loop",op="all_reduce"} > 10', 30_000);
    const exprs = dashboardExpressions(JSON.parse(readFileSync(join(ROOT, 'dashboards/grafana/dashboards/cmesh-overview.json'), 'utf8')));
    expect(exprs.length).toBeGreaterThanOrEqual(15);
    const empty: string[] = [];
    for (const { title, expr } of exprs) {
      const s = await prom.waitFor(expr, 10_000, finite).catch(() => null);
      if (!s) empty.push(`${title}: ${expr}`);
    }
    expect(empty).toEqual([]);
  }, 240_000);
});

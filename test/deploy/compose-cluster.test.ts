// The compose cluster for real: a Docker engine (started here if none runs, and then stopped
// here), local stand-ins for the Docker Hub base images (scripts/docker/standin-images.sh, cached
// by label), the images built from the Dockerfiles by `docker-compose build` (Docker's layer
// cache), and `docker-compose up` with the file's rank agents (one service and one NATS login
// each) and NATS as a JetStream cluster of three servers (docker-compose.nats-cluster.yml on top
// of docker-compose.yml). From the host, as a user would: the three servers elect one meta leader,
// NATS has each agent logged in as itself, `cmesh status`
// shows the agents, `cmesh bench --mesh` returns a checked table with 0 wrong, Prometheus in the
// cluster has every agent's collective durations, the example services (logged in as the second
// tenant) average weights through the mesh (collectives as a service), killing the NATS server
// the coordinator is connected to mid-sweep leaves the sweep complete with 0 wrong, killing one
// agent mid-sweep fails the job naming it, and `docker-compose down -v` leaves no container,
// network or volume.
// Grafana (no Debian package to make a stand-in from) is not started. Ports: Docker picks free
// ones, published on 127.0.0.1 only. Where no engine can be had, the tests are skipped, saying why.
import { ChildProcess, spawn, spawnSync, SpawnSyncReturns } from 'child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';
import { YAML11_SCHEMA, load } from 'js-yaml';
import { connect } from '@nats-io/transport-node';
import { AuthorizationError } from '@nats-io/nats-core';
import { setTimeout as sleep } from 'timers/promises';

const ROOT = resolve(__dirname, '../..');
const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');
const PROJECT = `cmeshdeploy${process.pid}x${Date.now().toString(36)}`;
const LABEL = `com.docker.compose.project=${PROJECT}`;
const FILES = ['docker-compose.yml', 'docker-compose.nats-cluster.yml'].flatMap((f) => ['-f', join(ROOT, f)]);
/** the NATS servers, as docker-compose.nats-cluster.yml names them */
const NATS = ['nats', 'nats-1', 'nats-2'];
// the agents' services (rank-agent-<i>) and their agent names, as docker-compose.yml defines them
const SERVICES = (
  load(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { schema: YAML11_SCHEMA }) as {
    services: Record<string, { environment?: Record<string, string> }>;
  }
).services;
const AGENTS = Object.entries(SERVICES)
  .filter(([s]) => /^rank-agent-\d+$/.test(s))
  .map(([service, s]) => ({ service, name: s.environment!.CMESH_AGENT_NAME }));
const N = AGENTS.length;

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const engineUp = () => spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 20_000 }).status === 0;

/** Decided at load time: why these tests cannot run here, or undefined when they can. */
function whyNot(): string | undefined {
  const missing = ['docker', 'docker-compose', 'debootstrap', 'nats-server', 'prometheus'].filter((c) => !has(c));
  if (missing.length) return `missing ${missing.join(', ')} (apt-get install docker.io docker-compose debootstrap nats-server prometheus)`;
  if (engineUp()) return undefined;
  if (!has('dockerd')) return 'no Docker engine runs and dockerd is not installed';
  if (process.getuid?.() !== 0) return 'no Docker engine runs and starting dockerd needs root';
  return undefined;
}
const skipReason = whyNot();
if (skipReason) console.warn(`compose cluster tests skipped: ${skipReason}`);
const describeEngine = skipReason ? describe.skip : describe;

function run(cmd: string, args: string[], opts: { timeout?: number; env?: NodeJS.ProcessEnv; allowFail?: boolean } = {}): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', timeout: opts.timeout ?? 120_000, env: opts.env ?? process.env, maxBuffer: 64 << 20 });
  if (!opts.allowFail && r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}${r.error ? ` (${r.error.message})` : ''}\n${(r.stdout ?? '').slice(-3000)}\n${(r.stderr ?? '').slice(-3000)}`,
    );
  }
  return r;
}

/** A deadline for Promise.race that does not hold jest open once the race is won. */
const deadline = (ms: number) => new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref());

describeEngine(`docker-compose cluster (${N} rank agents)`, () => {
  let dockerd: ChildProcess | undefined;
  let dockerdDir: string | undefined;
  let coordinator = '';
  let prometheus = '';
  // Docker picks the host ports (empty CMESH_*_PORT), on 127.0.0.1 (docker-compose.yml's default)
  const env = {
    ...process.env,
    CMESH_PUBLISH_ADDRESS: '127.0.0.1',
    CMESH_NATS_PORT: '',
    CMESH_COORDINATOR_PORT: '',
    CMESH_PROMETHEUS_PORT: '',
    CMESH_GRAFANA_PORT: '',
  };
  const compose = (args: string[], timeout = 120_000, allowFail = false) =>
    run('docker-compose', ['-p', PROJECT, ...FILES, ...args], { env, timeout, allowFail });
  /** the agents' container ids, in AGENTS' order */
  const agentContainers = () => AGENTS.map((a) => compose(['ps', '-q', a.service]).stdout.trim());
  const inspect = (id: string, format: string) => run('docker', ['inspect', '-f', format, id]).stdout.trim();
  // authentication is on: the host's CLI gets the API token auth-init made in the secrets volume
  let token = '';
  const auth = () => ({ authorization: `Bearer ${token}` });
  const cmesh = (args: string[], timeout = 60_000) =>
    run(process.execPath, [CMESH, ...args, '--coordinator', coordinator], { timeout, allowFail: true, env: { ...process.env, CMESH_API_TOKEN: token } });
  const leftovers = () =>
    [
      ['ps', '-a'],
      ['network', 'ls'],
      ['volume', 'ls'],
    ].flatMap(([what, ...rest]) =>
      run('docker', [what, ...rest, '-q', '--filter', `label=${LABEL}`])
        .stdout.split('\n')
        .filter(Boolean)
        .map((id) => `${what} ${id}`),
    );

  beforeAll(async () => {
    if (!engineUp()) {
      // our own engine: its log in a temporary folder, stopped in afterAll; the images it keeps in
      // /var/lib/docker are the next run's cache
      dockerdDir = mkdtempSync(join(tmpdir(), 'cmesh-dockerd-'));
      const log = openSync(join(dockerdDir, 'dockerd.log'), 'a');
      dockerd = spawn('dockerd', ['--pidfile', join(dockerdDir, 'dockerd.pid')], { stdio: ['ignore', log, log] });
      closeSync(log);
      for (const end = Date.now() + 60_000; !engineUp(); await sleep(500)) {
        if (Date.now() > end || dockerd.exitCode !== null)
          throw new Error(`dockerd did not start:\n${readFileSync(join(dockerdDir, 'dockerd.log'), 'utf8').slice(-3000)}`);
      }
    }
    run('bash', [join(ROOT, 'scripts/docker/standin-images.sh')], { timeout: 600_000 });
    const tags = ['cmesh/coordinator:dev', 'cmesh/rank-agent:dev', 'cmesh/cli:dev'];
    const imageIds = () => tags.map((t) => run('docker', ['image', 'inspect', '-f', '{{.Id}}', t], { allowFail: true }).stdout.trim());
    const before = imageIds();
    // the agents' services share one image: building the first builds it
    compose(['--profile', 'tools', 'build', 'coordinator', AGENTS[0].service, 'cli'], 900_000);
    // the images a rebuild replaced (not the ones the cache kept), unless something still uses
    // them: no dangling image per run
    const after = imageIds();
    for (const id of before.filter((id, i) => id && id !== after[i])) run('docker', ['rmi', id], { allowFail: true });
    compose(['up', '-d', '--no-build', ...NATS, 'coordinator', ...AGENTS.map((a) => a.service), 'prometheus'], 300_000);
    const port = (service: string, p: number) => compose(['port', service, String(p)]).stdout.trim();
    coordinator = `http://${port('coordinator', 7700)}`;
    prometheus = `http://${port('prometheus', 9090)}`;
    expect(coordinator).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(prometheus).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    token = compose(['--profile', 'tools', 'run', '--rm', '--no-deps', '--entrypoint', 'cat', 'cli', '/secrets/api-token']).stdout.trim();
    expect(token.length).toBeGreaterThanOrEqual(32);
  }, 1_200_000);

  it('authentication is on: the API asks for the token, NATS for a login', async () => {
    expect((await fetch(`${coordinator}/agents`)).status).toBe(401);
    expect((await fetch(`${coordinator}/agents`, { headers: auth() })).status).toBe(200);
    const nats = `nats://${compose(['port', 'nats', '4222']).stdout.trim()}`;
    await expect(connect({ servers: nats })).rejects.toThrow(AuthorizationError);
  });

  /** a NATS server's monitoring endpoint, read inside its container */
  const monitor = <T>(service: string, path: string) =>
    JSON.parse(compose(['exec', '-T', service, 'wget', '-q', '-O', '-', `http://127.0.0.1:8222${path}`]).stdout) as T;
  type Connz = { connections: { authorized_user?: string; name?: string }[] };

  it('the three NATS servers form one JetStream cluster', async () => {
    type Jsz = { meta_cluster?: { leader?: string; cluster_size?: number } };
    let metas: Jsz['meta_cluster'][] = [];
    for (const end = Date.now() + 60_000; Date.now() < end; await sleep(1000)) {
      metas = NATS.map((s) => monitor<Jsz>(s, '/jsz').meta_cluster);
      if (new Set(metas.map((m) => m?.leader)).size === 1 && metas[0]?.leader) break;
    }
    expect(metas.map((m) => [m?.leader, m?.cluster_size])).toEqual(NATS.map(() => [metas[0]?.leader, 3]));
    expect(NATS).toContain(metas[0]?.leader);
    for (const s of NATS) expect([s, monitor<{ num_routes: number }>(s, '/routez').num_routes]).toEqual([s, 2]);
  }, 90_000);

  it('each agent is logged in to NATS as itself (no shared agent login)', async () => {
    // the servers' own view of their connections (the monitoring port, inside each nats container)
    const connz = () => ({ connections: NATS.flatMap((s) => monitor<Connz>(s, '/connz?auth=true&limit=1024').connections) });
    let users: string[] = [];
    for (const end = Date.now() + 60_000; Date.now() < end; await sleep(1000)) {
      users = connz().connections.map((c) => c.authorized_user ?? '(none)');
      if (AGENTS.every((a) => users.includes(a.name))) break;
    }
    for (const a of AGENTS) expect(users.filter((u) => u === a.name).length).toBeGreaterThanOrEqual(1);
    expect(users).toContain('coordinator');
    expect(users).not.toContain('agent');
    expect(users).not.toContain('(none)');
  }, 90_000);

  afterAll(async () => {
    // whatever a failed test left: the project's containers, networks and volumes
    if (engineUp()) compose(['down', '-v', '--remove-orphans', '-t', '5'], 120_000, true);
    if (dockerd && dockerd.exitCode === null) {
      const exited = new Promise((r) => dockerd!.once('exit', r));
      dockerd.kill('SIGTERM');
      await Promise.race([exited, deadline(30_000)]);
      if (dockerd.exitCode === null) dockerd.kill('SIGKILL');
    }
    if (dockerdDir) rmSync(dockerdDir, { recursive: true, force: true });
  }, 180_000);

  it('cmesh status from the host shows the agents, named as their services say', async () => {
    const names = AGENTS.map((a) => a.name);
    expect(agentContainers().every(Boolean)).toBe(true);
    let out = '';
    for (const end = Date.now() + 60_000; Date.now() < end; await sleep(1000)) {
      out = cmesh(['status']).stdout;
      if (names.every((n) => new RegExp(`│ ${n} +│ ready +│`).test(out))) break;
    }
    expect(out).toMatch(new RegExp(`Agents \\(${N}[,)]`));
    for (const n of names) expect(out).toMatch(new RegExp(`│ ${n} +│ ready +│ tcp`));
  }, 90_000);

  it('cmesh bench --mesh -b 8 -e 1M: every size checked, 0 wrong, over the agents', () => {
    const r = cmesh(['bench', '--mesh', '-b', '8', '-e', '1M'], 180_000);
    expect([r.status, r.stderr]).toEqual([0, '']);
    const rows = r.stdout
      .split('\n')
      .filter((l) => /^\s+\d+\s+\d+\s+float/.test(l))
      .map((l) => l.trim().split(/\s+/));
    // 8 B to 1 MiB by 2: 18 sizes, all_reduce of float sum
    expect(rows.map((c) => Number(c[0]))).toEqual(Array.from({ length: 18 }, (_, i) => 8 << i));
    for (const c of rows) expect([c[0], c[8], c[12]]).toEqual([c[0], '0', '0']); // #wrong, out of place and in place
    expect(r.stdout).toMatch(/# Out of bounds values : 0 OK/);
    for (const rank of AGENTS.keys()) expect(r.stdout).toMatch(new RegExp(`Rank +${rank} Group +0 Pid +\\d+ on +\\S+ device tcp`));
  }, 200_000);

  it("Prometheus in the cluster scrapes every agent's cmesh_collective_duration_seconds", async () => {
    const ips = agentContainers()
      .map((id) => inspect(id, '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}'))
      .sort();
    expect(ips).toHaveLength(N);
    const query = `count by (instance) (cmesh_collective_duration_seconds_count{job="cmesh-agent"})`;
    let instances: string[] = [];
    for (const end = Date.now() + 60_000; Date.now() < end; await sleep(1000)) {
      const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(query)}`);
      const body = (await res.json()) as { status: string; data: { result: { metric: { instance: string } }[] } };
      expect(body.status).toBe('success');
      instances = body.data.result.map((s) => s.metric.instance.replace(/:\d+$/, '')).sort();
      if (instances.length === N) break;
    }
    expect(instances).toEqual(ips);
  }, 90_000);

  it('the CLI image: `docker-compose run --rm cli status` inside the network shows the agents', () => {
    const r = compose(['--profile', 'tools', 'run', '--rm', '--no-deps', 'cli', 'status'], 60_000);
    expect(r.stdout).toMatch(new RegExp(`Agents \\(${N}[,)]`));
  }, 90_000);

  it('the example services (profile examples, the second tenant team-b): two containers average their weights through the mesh and end identical', async () => {
    compose(['--profile', 'examples', 'up', '-d', '--no-build', '--no-deps', 'weights'], 120_000);
    const ids = compose(['--profile', 'examples', 'ps', '-q', 'weights']).stdout.split('\n').filter(Boolean);
    expect(ids).toHaveLength(2);
    for (const end = Date.now() + 90_000; Date.now() < end && ids.some((id) => inspect(id, '{{.State.Running}}') === 'true'); ) await sleep(500);
    const logs = compose(['--profile', 'examples', 'logs', '--no-color', 'weights']).stdout;
    expect(ids.map((id) => inspect(id, '{{.State.ExitCode}}'))).toEqual(['0', '0']);
    expect(logs.match(/weights identical on all 2 members/g)).toHaveLength(2);
    compose(['--profile', 'examples', 'rm', '-f', '-s', 'weights']);
  }, 150_000);

  it('killing the NATS server the coordinator is on mid-sweep: the sweep completes, 0 wrong; the server rejoins', async () => {
    const victim = NATS.find((s) => monitor<Connz>(s, '/connz?limit=1024').connections.some((c) => c.name?.startsWith('cmesh-coordinator-')))!;
    expect(victim).toBeDefined();
    const bench = spawn(process.execPath, [CMESH, 'bench', '--mesh', '--coordinator', coordinator, '-b', '64K', '-e', '4M', '-n', '200', '-w', '2'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CMESH_API_TOKEN: token },
    });
    let out = '';
    bench.stdout!.on('data', (d) => (out += d));
    bench.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => bench.once('exit', (code) => r(code)));
    try {
      let job: { id: string; state: string; progress: { done: number } } | undefined;
      for (const end = Date.now() + 60_000; Date.now() < end && bench.exitCode === null; await sleep(100)) {
        const { jobs } = (await (await fetch(`${coordinator}/jobs?limit=1`, { headers: auth() })).json()) as { jobs: NonNullable<typeof job>[] };
        job = jobs[0];
        if (job?.state === 'running' && job.progress.done >= 1) break;
      }
      expect(job).toMatchObject({ state: 'running' });
      run('docker', ['kill', '--signal', 'KILL', compose(['ps', '-q', victim]).stdout.trim()]);
      const code = await Promise.race([exited, deadline(120_000)]);
      // the bench's own output when it did not end well
      expect(code === 0 && /# Out of bounds values : 0 OK/.test(out) ? 'ok' : `exit ${code}:\n${out.slice(-3000)}`).toBe('ok');
      const rows = out
        .split('\n')
        .filter((l) => /^\s+\d+\s+\d+\s+float/.test(l))
        .map((l) => l.trim().split(/\s+/));
      expect(rows.length).toBe(7); // 64K to 4M by 2
      for (const c of rows) expect([c[0], c[8], c[12]]).toEqual([c[0], '0', '0']);
      const record = (await (await fetch(`${coordinator}/jobs/${job!.id}`, { headers: auth() })).json()) as { state: string };
      expect(record.state).toBe('succeeded');
    } finally {
      if (bench.exitCode === null) bench.kill('SIGKILL');
    }
    // started again on its volume, it rejoins: healthy (in contact with the meta leader, caught up)
    compose(['start', victim]);
    let health = '';
    for (const end = Date.now() + 90_000; health !== 'healthy' && Date.now() < end; await sleep(1000))
      health = inspect(compose(['ps', '-q', victim]).stdout.trim(), '{{.State.Health.Status}}');
    expect(health).toBe('healthy');
  }, 300_000);

  it('killing one agent container mid-sweep fails the job, naming that agent', async () => {
    const victim = agentContainers()[1];
    const name = AGENTS[1].name;
    // seconds of work, so the kill lands mid-sweep
    const bench = spawn(process.execPath, [CMESH, 'bench', '--mesh', '--coordinator', coordinator, '-b', '64K', '-e', '4M', '-n', '300', '-w', '2'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CMESH_API_TOKEN: token },
    });
    let out = '';
    bench.stdout!.on('data', (d) => (out += d));
    bench.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => bench.once('exit', (code) => r(code)));
    try {
      // under way: a running job with a row done
      let job: { id: string; state: string; progress: { done: number } } | undefined;
      for (const end = Date.now() + 60_000; Date.now() < end && bench.exitCode === null; await sleep(100)) {
        const { jobs } = (await (await fetch(`${coordinator}/jobs?limit=1`, { headers: auth() })).json()) as { jobs: NonNullable<typeof job>[] };
        job = jobs[0];
        if (job?.state === 'running' && job.progress.done >= 1) break;
      }
      expect(job).toMatchObject({ state: 'running', progress: { done: expect.any(Number) } });
      run('docker', ['kill', '--signal', 'KILL', victim]);
      const code = await Promise.race([exited, deadline(60_000)]);
      expect(code).not.toBe('timeout');
      expect(code).not.toBe(0);
      expect(out).toMatch(new RegExp(`# job ${job!.id} failed: .*agent ${name} \\(rank \\d\\)`));
      const record = (await (await fetch(`${coordinator}/jobs/${job!.id}`, { headers: auth() })).json()) as { state: string; failedAgent?: string };
      expect(record).toMatchObject({ state: 'failed', failedAgent: name });
    } finally {
      if (bench.exitCode === null) bench.kill('SIGKILL');
    }
  }, 120_000);

  it('docker-compose down -v leaves no container, network or volume of the project', () => {
    expect(leftovers().length).toBeGreaterThan(0); // the check sees what up made
    compose(['down', '-v', '--remove-orphans', '-t', '5'], 120_000);
    expect(leftovers()).toEqual([]);
  }, 150_000);
});

// the stand-in builder, checked without an engine: it never pulls and tags what the files name
it('the stand-in base images carry the tags the Dockerfiles and docker-compose.yml use', () => {
  const script = readFileSync(join(ROOT, 'scripts/docker/standin-images.sh'), 'utf8');
  const composeFile = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
  for (const tag of ['nats:2.10-alpine', 'prom/prometheus:v2.53.2']) {
    expect(script).toContain(`=${tag}`);
    expect(composeFile).toContain(`image: ${tag}`);
  }
  expect(script).toContain('NODE_TAG=node:22-bookworm-slim');
  for (const f of ['apps/coordinator/Dockerfile', 'apps/rank-agent/Dockerfile', 'apps/cli/Dockerfile']) {
    expect(readFileSync(join(ROOT, f), 'utf8')).toMatch(/^ARG BASE_IMAGE=node:22-bookworm-slim$/m);
  }
  expect(script).not.toMatch(/docker(\s+\S+)*\s+pull\b/);
  expect(existsSync(join(ROOT, 'scripts/docker/standin-images.sh'))).toBe(true);
});

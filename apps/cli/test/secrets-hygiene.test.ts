// Secrets never leak: a mesh with authentication on (`cmesh up`, its secrets in a fresh state
// directory) runs a job, and a `cmesh run` job rendezvouses through its NATS as a client and runs
// with the run's secret; then every log line of every process, every /metrics and /health
// output, every process title (`ps`) and the error messages of refused requests (a wrong API
// token, anonymous and forbidden NATS use, a wrong run secret) are searched for each secret value.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { tmpdir } from 'os';
import { join } from 'path';
import { AuthenticationError, TcpStore } from '@cmesh/collectives';
import { markedPids } from '@cmesh/testing';

const CMESH = join(__dirname, '../bin/cmesh.js');
const FIX = join(__dirname, 'fixtures');

describe('no secret in logs, metrics, process titles or error messages', () => {
  const marker = `secrets-${process.pid}-${Date.now()}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'cmesh-secrets-state-'));
  const scratch = mkdtempSync(join(tmpdir(), 'cmesh-secrets-scratch-'));
  let up: ChildProcess | undefined;

  afterAll(() => {
    for (const pid of markedPids(marker)) process.kill(pid, 'SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  });

  it('greps everything a user or operator can see for every secret', async () => {
    const env = { ...process.env, CMESH_TEST_MARK: marker, CMESH_STATE_DIR: stateDir, LOG_LEVEL: 'debug', CMESH_DEBUG: 'INFO' };
    up = spawn(process.execPath, [CMESH, 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    up.stdout!.on('data', (d) => (logs += d));
    up.stderr!.on('data', (d) => (logs += d));
    let m: RegExpExecArray | null = null;
    for (const end = Date.now() + 90_000; !m && Date.now() < end && up.exitCode === null; await new Promise((r) => setTimeout(r, 100))) {
      m = /mesh up: nats nats:\/\/(\S+), coordinator (http:\/\/\S+),/.exec(logs);
    }
    expect(m).not.toBeNull();
    const [, natsAddr, url] = m!;
    const token = readFileSync(join(stateDir, 'api-token'), 'utf8').trim();
    const passwords = Object.fromEntries(
      readdirSync(join(stateDir, 'nats'))
        .filter((f) => f.endsWith('.password'))
        .map((f) => [f.replace('.password', ''), readFileSync(join(stateDir, 'nats', f), 'utf8').trim()]),
    );
    expect(Object.keys(passwords).sort()).toEqual(['agent-0', 'agent-1', 'client', 'coordinator']);

    const seen: Record<string, string> = {};
    const cli = (args: string[], extra: NodeJS.ProcessEnv = {}) => {
      const r = spawnSync(process.execPath, [CMESH, ...args], { env: { ...env, ...extra }, encoding: 'utf8', timeout: 120_000 });
      return { status: r.status, text: `${r.stdout}\n${r.stderr}` };
    };

    // a mesh job, and a `cmesh run` job through the mesh's NATS (the run's secret on its store and data plane)
    const bench = cli(['bench', '--mesh', '--coordinator', url, '-b', '8', '-e', '1K', '-f', '8', '-n', '2', '-w', '1']);
    expect(bench.status).toBe(0);
    seen['cmesh bench --mesh'] = bench.text;
    const secretFile = join(scratch, 'run-secret');
    const run = spawn(
      process.execPath,
      [
        CMESH,
        'run',
        '--nproc-per-node',
        '2',
        '--rdzv-backend',
        'nats',
        '--rdzv-endpoint',
        natsAddr,
        '--rdzv-id',
        'hygiene',
        join(FIX, 'secret-holder.ts'),
        secretFile,
        '4000',
      ],
      { env: { ...env, NATS_USER: 'client', NATS_PASSWORD_FILE: join(stateDir, 'nats', 'client.password') }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let runOut = '';
    run.stdout!.on('data', (d) => (runOut += d));
    run.stderr!.on('data', (d) => (runOut += d));
    const runExit = new Promise<number | null>((r) => run.once('exit', (c) => r(c)));
    for (const end = Date.now() + 90_000; !/sum 3/.test(runOut) && Date.now() < end && run.exitCode === null; ) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 500));
    // process titles while everything runs: the mesh, its job workers, the launcher, its workers
    const pids = markedPids(marker);
    expect(pids.length).toBeGreaterThanOrEqual(7); // up, nats, coordinator, 2 agents, cmesh run, 2 workers
    seen['ps'] = spawnSync('ps', ['-o', 'pid=,args=', '-p', pids.join(',')], { encoding: 'utf8' }).stdout;
    seen['/proc/*/cmdline'] = pids
      .map((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ');
        } catch {
          return '';
        }
      })
      .join('\n');
    expect(seen['ps']).toMatch(/nats-server -c \S+nats-server\.conf/);
    expect(seen['ps']).toMatch(/secret-holder\.ts/);
    expect(await runExit).toBe(0);
    seen['cmesh run'] = runOut;
    const runSecret = readFileSync(secretFile, 'utf8');
    expect(runSecret.length).toBeGreaterThanOrEqual(32);

    // what operators scrape and probe
    const auth = { authorization: `Bearer ${token}` };
    const agents = ((await (await fetch(`${url}/agents`, { headers: auth })).json()) as { agents: { name: string; httpUrl: string }[] }).agents;
    seen['coordinator /metrics'] = await (await fetch(`${url}/metrics`)).text();
    seen['coordinator /health'] = await (await fetch(`${url}/health`)).text();
    seen['GET /agents, /jobs'] = JSON.stringify(agents) + (await (await fetch(`${url}/jobs`, { headers: auth })).text());
    for (const a of agents) {
      seen[`${a.name} /metrics`] = await (await fetch(`${a.httpUrl}/metrics`)).text();
      seen[`${a.name} /health`] = await (await fetch(`${a.httpUrl}/health`)).text();
    }
    expect(seen['coordinator /metrics']).toMatch(/cmesh_jobs_total\{state="succeeded",cluster="default"\} [1-9]/);

    // refusals, and what they say
    const wrongToken = 'w'.repeat(40);
    seen['401'] = await (await fetch(`${url}/jobs`, { headers: { authorization: `Bearer ${wrongToken}` } })).text();
    seen['cmesh status, wrong token'] = cli(['status', '--coordinator', url], { CMESH_API_TOKEN: wrongToken }).text;
    expect(seen['cmesh status, wrong token']).toMatch(/401/);
    seen['anonymous NATS'] = await connect({ servers: `nats://${natsAddr}` }).then(
      () => 'connected',
      (e: Error) => e.message,
    );
    expect(seen['anonymous NATS']).toMatch(/Authorization Violation/);
    seen['wrong NATS password'] = await connect({ servers: `nats://${natsAddr}`, user: 'agent-0', pass: passwords['agent-1'] }).then(
      () => 'connected',
      (e: Error) => e.message,
    );
    const agent = await connect({ servers: `nats://${natsAddr}`, user: 'agent-0', pass: passwords['agent-0'] });
    const statuses: string[] = [];
    void (async () => {
      for await (const s of agent.status()) statuses.push(s.type === 'error' ? `${s.type} ${s.error.name}: ${s.error.message}` : s.type);
    })();
    agent.publish('cmesh.jobs.start', '{}');
    await agent.flush();
    await new Promise((r) => setTimeout(r, 300));
    await agent.close();
    seen['agent publishing jobs.start'] = statuses.join('\n');
    expect(seen['agent publishing jobs.start']).toMatch(/PermissionViolationError: Permissions Violation for Publish to "cmesh\.jobs\.start"/);
    const store = await TcpStore.create({ port: 0, isMaster: true, secret: runSecret });
    seen['TcpStore, wrong secret'] = await TcpStore.create({ port: store.port, timeoutMs: 5000, secret: token }).then(
      () => 'connected',
      (e: Error) => `${e.name}: ${e.message}`,
    );
    await store.close();
    expect(seen['TcpStore, wrong secret']).toMatch(new RegExp(AuthenticationError.name));

    up.kill('SIGINT');
    await new Promise((r) => up!.once('exit', r));
    seen["every process's log (cmesh up)"] = logs;
    expect(logs).toMatch(/\[coordinator\]/);
    expect(logs).toMatch(/\[agent-1\]/);

    const secrets: Record<string, string> = {
      'API token': token,
      'run secret': runSecret,
      ...Object.fromEntries(Object.entries(passwords).map(([u, p]) => [`NATS password of ${u}`, p])),
    };
    const leaks = Object.entries(seen).flatMap(([where, text]) =>
      Object.entries(secrets)
        .filter(([, value]) => text.includes(value))
        .map(([what]) => `${what} in ${where}`),
    );
    expect(leaks).toEqual([]);
    for (const [where, text] of Object.entries(seen)) expect([where, text.includes(wrongToken)]).toEqual([where, false]);
    expect(Object.values(seen).every((t) => t.length > 0)).toBe(true);
  }, 300_000);
});

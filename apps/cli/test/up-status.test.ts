// `cmesh up` as a user runs it: a child process with its own nats-server, the coordinator and
// 2 agents, authentication on (secrets made in a fresh state directory); `cmesh status` and
// `cmesh bench --mesh` against it; Ctrl-C (SIGINT) stops it with exit code 0 and leaves no
// process behind (every descendant carries a marker in its environment, and none is left in /proc).
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { AuthorizationError } from '@nats-io/nats-core';
import { tmpdir } from 'os';
import { join } from 'path';
import { markedPids } from '@cmesh/testing';

const CMESH = join(__dirname, '../bin/cmesh.js');

describe('cmesh up / status / bench --mesh', () => {
  const marker = `up-${process.pid}-${Date.now()}`;
  let up: ChildProcess | undefined;
  const stateDir = mkdtempSync(join(tmpdir(), 'cmesh-up-state-'));

  afterAll(() => {
    for (const pid of markedPids(marker)) process.kill(pid, 'SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('brings up a mesh, shows it, benches through it, and stops cleanly on SIGINT', async () => {
    up = spawn(process.execPath, [CMESH, 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], {
      env: { ...process.env, CMESH_TEST_MARK: marker, CMESH_STATE_DIR: stateDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    up.stdout!.on('data', (d) => (out += d));
    up.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => up!.once('exit', (code) => r(code)));
    const deadline = Date.now() + 90_000;
    let url: string | undefined;
    while (!url && Date.now() < deadline && up.exitCode === null) {
      url = /mesh up: nats \S+, coordinator (http:\/\/\S+),/.exec(out)?.[1];
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(url).toBeDefined();
    // the CLI finds the token in the state directory, as on the machine that ran `cmesh up`
    const env = { ...process.env, CMESH_TEST_MARK: marker, CMESH_STATE_DIR: stateDir };
    const token = readFileSync(join(stateDir, 'api-token'), 'utf8').trim();
    const auth = { authorization: `Bearer ${token}` };
    // secrets made at first start: a private directory, private files
    expect(statSync(stateDir).mode & 0o777).toBe(0o700);
    for (const f of ['api-token', ...readdirSync(join(stateDir, 'nats')).map((x) => `nats/${x}`)])
      expect([f, statSync(join(stateDir, f)).mode & 0o777]).toEqual([f, 0o600]);
    expect(readdirSync(join(stateDir, 'nats')).sort()).toEqual([
      'agent-0.password',
      'agent-1.password',
      'client.password',
      'coordinator.password',
      'nats-server.conf',
    ]);
    // nobody without a login reaches NATS, nobody without the token the API
    const natsUrl = /mesh up: nats (\S+),/.exec(out)![1];
    await expect(connect({ servers: natsUrl })).rejects.toThrow(AuthorizationError);
    expect((await fetch(`${url}/agents`)).status).toBe(401);
    expect(out).toMatch(/authentication on; secrets in /);
    // the live page's login link (a login token, not the API token) gets a browser in; cmesh ui prints the same
    const link = /cmesh: live page: (\S+)/.exec(out)?.[1];
    expect(link).toMatch(new RegExp(`^${url}/ui/login\\?token=[A-Za-z0-9_-]{43}$`));
    expect(out).not.toContain(token);
    const login = await fetch(link!, { redirect: 'manual' });
    expect([login.status, login.headers.get('location')]).toEqual([303, '/ui']);
    const cookie = login.headers.get('set-cookie')!.split(';')[0];
    expect((await fetch(`${url}/ui`, { headers: { cookie } })).status).toBe(200);
    expect(spawnSync(process.execPath, [CMESH, 'ui', '--coordinator', url!], { env, encoding: 'utf8', timeout: 30_000 }).stdout).toBe(`${link}\n`);

    const status = spawnSync(process.execPath, [CMESH, 'status', '--coordinator', url!], { env, encoding: 'utf8', timeout: 30_000 });
    expect(status.status).toBe(0);
    expect(status.stdout).toMatch(/Agents \(2\)/);
    for (const name of ['agent-0', 'agent-1']) expect(status.stdout).toMatch(new RegExp(`│ ${name} +│ ready +│ tcp, nccl \\(unavailable`));
    expect(status.stdout).toMatch(/Groups \(0\)/);
    expect(status.stdout).toMatch(/Service groups \(0\)/);
    expect(status.stdout).toMatch(/Recent jobs \(0\)/);

    const bench = spawnSync(
      process.execPath,
      [CMESH, 'bench', '--mesh', '--coordinator', url!, '-b', '8', '-e', '2K', '-f', '16', '-n', '2', '-w', '1', 'all_reduce,broadcast', '-r', '1'],
      {
        env,
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(bench.stderr).toBe('');
    expect(bench.status).toBe(0);
    const rows = bench.stdout.split('\n').filter((l) => /^\s+\d+\s+\d+\s+float/.test(l));
    expect(rows.map((l) => l.trim().split(/\s+/).slice(0, 5))).toEqual([
      ['8', '2', 'float', 'sum', '-1'],
      ['128', '32', 'float', 'sum', '-1'],
      ['2048', '512', 'float', 'sum', '-1'],
      ['8', '2', 'float', 'none', '1'],
      ['128', '32', 'float', 'none', '1'],
      ['2048', '512', 'float', 'none', '1'],
    ]);
    for (const l of rows) expect([l.trim().split(/\s+/)[8], l.trim().split(/\s+/)[12]]).toEqual(['0', '0']); // #wrong
    expect(bench.stdout).toMatch(/Rank {2}1 Group {2}0 Pid +\d+ on +127\.0\.0\.1 device tcp slot 1 \(agent-1\)/);

    // spawnSync blocked this process while the coordinator closed the idle keep-alive socket: one
    // turn of the event loop lets the client see that before the POST (not safe to send twice)
    await new Promise((r) => setTimeout(r, 20));
    const g = await fetch(`${url}/groups`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ members: ['agent-1', 'agent-0'], name: 'pair' }),
    });
    expect(g.status).toBe(201);
    const group = ((await g.json()) as { id: string }).id;
    // the coordinator notified the members: each agent's /health lists the group with its rank
    const agents = (await (await fetch(`${url}/agents`, { headers: auth })).json()) as
      | { agents?: { name: string; httpUrl?: string }[] }
      | { name: string; httpUrl?: string }[];
    const list = Array.isArray(agents) ? agents : (agents.agents ?? []);
    for (const [name, rank] of [
      ['agent-1', 0],
      ['agent-0', 1],
    ] as const) {
      const http = list.find((a) => a.name === name)!.httpUrl!;
      let groups: { groupId: string; rank: number; size: number }[] = [];
      for (let end = Date.now() + 10_000; !groups.some((x) => x.groupId === group) && Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
        groups = ((await (await fetch(`${http}/health`)).json()) as { groups: typeof groups }).groups;
      }
      expect(groups).toContainEqual(expect.objectContaining({ groupId: group, rank, size: 2 }));
    }
    const viaGroup = spawnSync(
      process.execPath,
      [
        CMESH,
        'bench',
        '--mesh',
        '--coordinator',
        url!,
        '--group',
        group,
        '-b',
        '64',
        '-e',
        '64',
        '-n',
        '1',
        '-w',
        '0',
        '--coll',
        'gather',
        '-r',
        '1',
        '--json',
      ],
      { env, encoding: 'utf8', timeout: 60_000 },
    );
    expect(viaGroup.status).toBe(0);
    const doc = JSON.parse(viaGroup.stdout) as {
      jobs: { state: string; members: { name: string }[]; rows: { root: number; outOfPlace: { wrong: number } }[] }[];
    };
    expect(doc.jobs[0].members.map((m) => m.name)).toEqual(['agent-1', 'agent-0']);
    expect(doc.jobs[0].rows).toEqual([expect.objectContaining({ root: 1, outOfPlace: expect.objectContaining({ wrong: 0 }) })]);
    const after = spawnSync(process.execPath, [CMESH, 'status', '--coordinator', url!], { env, encoding: 'utf8', timeout: 30_000 });
    expect(after.stdout).toMatch(/Groups \(1\)/);
    expect(after.stdout).toMatch(/│ pair +│ agent-1, agent-0 +│/);
    expect(after.stdout).toMatch(/Recent jobs \(3\)/);
    expect(after.stdout.match(/succeeded/g)).toHaveLength(3);

    // an agent that dies is restarted alone: the mesh stays up and the agent registers again
    // spawnSync blocked this process while the coordinator closed its idle keep-alive socket, so
    // the first request after it may be sent on that closed socket: sent again on a new one
    const agentsNow = () =>
      fetch(`${url}/agents`, { headers: auth }).catch((e: Error) => {
        if (!/other side closed|ECONNRESET/.test(String((e.cause as Error | undefined)?.message))) throw e;
        return fetch(`${url}/agents`, { headers: auth });
      });
    const pidOf = async (name: string) =>
      ((await (await agentsNow()).json()) as { agents: { name: string; pid: number; state: string }[] }).agents.find((a) => a.name === name)!;
    const victim = (await pidOf('agent-1')).pid;
    const other = (await pidOf('agent-0')).pid;
    process.kill(victim, 'SIGKILL');
    let back = await pidOf('agent-1');
    for (let end = Date.now() + 30_000; (back.pid === victim || back.state !== 'ready') && Date.now() < end; await new Promise((r) => setTimeout(r, 100)))
      back = await pidOf('agent-1');
    expect([back.pid === victim, back.state]).toEqual([false, 'ready']);
    expect((await pidOf('agent-0')).pid).toBe(other);
    expect(out).toMatch(/\[agent-1\] +exited with SIGKILL; restarting it in \d+ ms/);
    expect(up.exitCode).toBeNull();

    const running = markedPids(marker);
    expect(running.length).toBeGreaterThanOrEqual(5); // up, nats, coordinator, 2 agents (+ workers)
    up.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toMatch(/SIGINT received; stopping/);
    expect(markedPids(marker)).toEqual([]);
  }, 150_000);

  it('a SIGINT while the mesh is still starting stops what was started and leaves nothing behind', async () => {
    const early = `${marker}-early`;
    const child = spawn(process.execPath, [CMESH, 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], {
      env: { ...process.env, CMESH_TEST_MARK: early, CMESH_STATE_DIR: stateDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      // wait for the first children (nats-server, the coordinator), not for the mesh
      for (let end = Date.now() + 30_000; markedPids(early).length < 3 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
      expect(markedPids(early).length).toBeGreaterThanOrEqual(3);
      child.kill('SIGINT');
      expect(await exited).toBe(1);
      expect(markedPids(early)).toEqual([]);
    } finally {
      for (const pid of markedPids(early)) process.kill(pid, 'SIGKILL');
    }
  }, 60_000);
});

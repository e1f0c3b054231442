// The agent's node mode (`--devices N`), as the GPU overlay's DaemonSet runs it: one supervisor
// process starts one agent per device, and each registers with the real coordinator under its own
// name, device and NATS login (a nats-server with authentication on, one password file per agent,
// found through {agent} in NATS_PASSWORD_FILE). An agent killed with SIGKILL is restarted and
// registers again; SIGTERM to the supervisor stops every agent, which deregisters, and leaves no
// process behind.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { AgentRecord, nodeAgentNames } from '@cmesh/protocol';
import { Mesh, startMesh, COORDINATOR_USER, prepareMeshAuth, nodeArgs, programEnv, programOf } from '@cmesh/testing/mesh';
import { nodeHealth } from '../src/node/node-health';
import { NatsServer, freePort, startNatsServer, markedPids } from '@cmesh/testing';

const NODE = 'gpu-node-7.cluster.internal';
const DEVICES = 3;
const MARK = `node-mode-${process.pid}`;

describe('rank agent node mode', () => {
  let nats: NatsServer | undefined;
  let mesh: Mesh | undefined;
  let node: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'cmesh-node-mode-'));
  const lines: string[] = [];

  afterAll(async () => {
    if (node?.exitCode === null) node.kill('SIGKILL');
    for (const pid of markedPids(MARK)) process.kill(pid, 'SIGKILL');
    await mesh?.stop();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const agents = async (): Promise<AgentRecord[]> => ((await mesh!.client.get<{ agents: AgentRecord[] }>('/agents')) ?? { agents: [] }).agents;
  const until = async <T>(what: string, ms: number, f: () => Promise<T | undefined>): Promise<T> => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
      const v = await f().catch(() => undefined);
      if (v !== undefined) return v;
    }
    throw new Error(`${what}: not within ${ms} ms; output:\n${lines.slice(-40).join('\n')}`);
  };
  const alive = (list: AgentRecord[]) => list.filter((a) => a.state !== 'lost' && a.name.startsWith(NODE.replace(/\./g, '_')));

  it('starts one agent per device with its own name, device and login; restarts one that dies; SIGTERM stops them all', async () => {
    const names = nodeAgentNames([NODE], DEVICES);
    const auth = prepareMeshAuth(join(dir, 'state'), names);
    nats = await startNatsServer({ config: readFileSync(auth.natsConf, 'utf8') });
    mesh = await startMesh({ agents: 0, natsUrl: nats.url, port: 0, env: auth.login(COORDINATOR_USER), write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
    const httpBase = await freePort();
    node = spawn(process.execPath, [...nodeArgs(programOf('@cmesh/rank-agent', 'main')), '--devices', String(DEVICES)], {
      env: {
        ...process.env,
        ...programEnv(),
        CMESH_TEST_MARK: MARK,
        NATS_URL: nats.url,
        CMESH_NODE_NAME: NODE,
        CMESH_AGENT_HOST: '127.0.0.1',
        CMESH_NCCL: '0',
        CMESH_HTTP_PORT: String(httpBase),
        // one login per agent: the supervisor fills {agent} with each one's name
        NATS_PASSWORD_FILE: auth.login('{agent}').NATS_PASSWORD_FILE,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [node.stdout!, node.stderr!]) s.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));

    const first = await until(`${DEVICES} agents registered`, 90_000, async () => {
      const list = alive(await agents());
      return list.length === DEVICES ? list : undefined;
    });
    expect(first.map((a) => a.name).sort()).toEqual(names);
    expect(first.map((a) => [a.name, a.device.index]).sort()).toEqual(names.map((n, i) => [n, i]));
    expect(new Set(first.map((a) => a.pid)).size).toBe(DEVICES);
    // every agent serves its own HTTP port: base + its device
    for (const a of first) {
      expect(a.httpUrl).toBe(`http://127.0.0.1:${httpBase + a.device.index}`);
      expect((await fetch(`${a.httpUrl}/health`)).ok).toBe(true);
    }
    // the pod's readiness probe: every agent of the node answers (the probe's own process, as the kubelet runs it)
    const healthEnv = { CMESH_DEVICES: String(DEVICES), CMESH_HTTP_PORT: String(httpBase), CMESH_AGENT_HOST: '127.0.0.1' };
    const probe = () =>
      spawnSync(process.execPath, nodeArgs(programOf('@cmesh/rank-agent', 'node/node-health')), {
        env: { ...process.env, ...programEnv(), ...healthEnv },
        encoding: 'utf8',
        timeout: 60_000,
      });
    expect([probe().status, await nodeHealth(healthEnv)]).toEqual([0, []]);
    // the node each reports, where the protocol carries it
    for (const a of first) if ('node' in a) expect((a as { node?: string }).node).toBe(NODE);

    // one agent dies: the supervisor starts it again, it registers with the same name and device
    const victim = first.find((a) => a.device.index === 1)!;
    process.kill(victim.pid!, 'SIGKILL');
    await until('the killed agent gone', 10_000, async () => (markedPids(MARK).includes(victim.pid!) ? undefined : true));
    // until it is back, the probe says which agent is down
    const down = probe();
    expect([down.status, down.stderr]).toEqual([1, expect.stringMatching(new RegExp(`^device 1: http://127\\.0\\.0\\.1:${httpBase + 1}/health: `))]);
    const back = await until('the killed agent back', 60_000, async () => {
      const a = alive(await agents()).find((x) => x.name === victim.name && x.pid !== victim.pid);
      return a && (await fetch(`${a.httpUrl}/health`)).ok ? a : undefined;
    });
    expect(back.device.index).toBe(1);
    expect(await nodeHealth(healthEnv)).toEqual([]);
    expect(lines.join('\n')).toMatch(new RegExp(`${victim.name} \\(pid ${victim.pid}\\) exited with SIGKILL after \\d+ s; restarting it in 1 s`));

    // SIGTERM: every agent stops (deregistering), then the supervisor exits 0, leaving nothing
    const exited = new Promise<[number | null, string | null]>((r) => node!.once('exit', (c, s) => r([c, s])));
    const t0 = Date.now();
    node.kill('SIGTERM');
    expect(await exited).toEqual([0, null]);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(markedPids(MARK)).toEqual([]);
    const after = await agents();
    expect(alive(after)).toEqual([]);
  }, 240_000);
});

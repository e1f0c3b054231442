// The mesh the chaos soak attacks: nats-server (JetStream on disk, so a restart finds its
// streams again), R coordinator replicas and A rank agents, each a ChaosProcess that keeps its
// name, ports and state across a SIGKILL and restart. The first replica started is the leader.
// Authentication is on, as `cmesh up` runs it: the nats-server admits only the mesh's logins
// (the coordinator's, one per agent named as the agent, the `client` tenant's), each held to its
// role's permissions, and the REST API asks for the token.
import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { freePort, waitForPort } from '@cmesh/testing';
import { MeshClient } from '../../apps/cli/src/mesh/client';
import { listAgents } from '../../apps/cli/src/mesh/launch';
import { CLIENT_USER, COORDINATOR_USER, MeshAuth, prepareMeshAuth } from '../../apps/cli/src/mesh/mesh-auth';
import { nodeArgs, programEnv, programOf } from '../../apps/cli/src/programs';
import { ChaosProcess } from './processes';

export interface ChaosMeshOptions {
  agents: number;
  replicas: number;
  /** extra environment for the coordinators and agents */
  env?: NodeJS.ProcessEnv;
  readyTimeoutMs?: number;
}

const HOST = '127.0.0.1';

export async function until(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export class ChaosMesh {
  private constructor(
    readonly nats: ChaosProcess,
    readonly natsUrl: string,
    private readonly natsPort: number,
    readonly replicas: { proc: ChaosProcess; client: MeshClient; id: string }[],
    readonly agents: ChaosProcess[],
    /** the mesh's secrets (API token, NATS passwords, the server's configuration) */
    readonly auth: MeshAuth,
    private readonly storeDir: string,
    private readonly readyMs: number,
  ) {}

  static async start(o: ChaosMeshOptions): Promise<ChaosMesh> {
    const readyMs = o.readyTimeoutMs ?? 60_000;
    // JetStream's store and the secrets in one directory, removed at the end
    const storeDir = mkdtempSync(join(tmpdir(), 'cmesh-chaos-nats-'));
    const agentNames = Array.from({ length: o.agents }, (_, i) => `agent-${i}`);
    const auth = prepareMeshAuth(join(storeDir, 'state'), agentNames);
    const natsPort = await freePort();
    const natsUrl = `nats://${HOST}:${natsPort}`;
    // -c at every start: a restarted server admits the same logins
    const nats = new ChaosProcess({ name: 'nats', command: 'nats-server', args: ['-c', auth.natsConf, '-js', '-a', HOST, '-p', String(natsPort), '-sd', join(storeDir, 'js')] });
    const env = { ...process.env, ...programEnv(), NO_COLOR: '1', LOG_LEVEL: 'warn', ...o.env, NATS_URL: natsUrl };
    const replicas: { proc: ChaosProcess; client: MeshClient; id: string }[] = [];
    for (let i = 0; i < o.replicas; i++) {
      const port = await freePort();
      const id = `replica-${i}`;
      const proc = new ChaosProcess({
        name: id,
        command: process.execPath,
        args: nodeArgs(programOf('@cmesh/coordinator', 'main')),
        env: { ...env, ...auth.login(COORDINATOR_USER), CMESH_API_TOKEN_FILE: auth.apiTokenFile, HTTP_PORT: String(port), HTTP_HOST: HOST, CMESH_REPLICA_ID: id },
      });
      replicas.push({ proc, client: new MeshClient(`http://${HOST}:${port}`, 5000, auth.apiToken), id });
    }
    const agents = agentNames.map(
      (name, i) =>
        new ChaosProcess({
          name,
          command: process.execPath,
          args: nodeArgs(programOf('@cmesh/rank-agent', 'main')),
          // each agent logs in as itself (an agent whose id is not its login refuses to start)
          env: { ...env, ...auth.login(name), CMESH_AGENT_NAME: name, CMESH_DEVICE_INDEX: String(i), CMESH_AGENT_HOST: HOST },
        }),
    );
    const mesh = new ChaosMesh(nats, natsUrl, natsPort, replicas, agents, auth, storeDir, readyMs);
    try {
      await mesh.restart(nats);
      for (const r of replicas) await mesh.restart(r.proc);
      for (const a of agents) a.start();
      await until(`${o.agents} agents`, readyMs, async () => (await mesh.liveAgents()).length === o.agents);
      return mesh;
    } catch (e) {
      // what the processes that are not up printed last
      const live: string[] = await mesh.liveAgents().catch(() => []);
      const said = mesh.all.filter((p) => !p.alive || (agents.includes(p) && !live.includes(p.name))).map((p) => `${p.name}: ${p.tail.slice(-3).map((t) => t.line).join(' | ') || '(nothing)'}`);
      await mesh.stop();
      throw said.length ? new Error(`${(e as Error).message}; ${said.join('; ')}`) : e;
    }
  }

  /** The tenant login service members and job submitters use: NATS user and password. */
  clientLogin(): { user: string; pass: string } {
    return { user: CLIENT_USER, pass: readFileSync(this.auth.login(CLIENT_USER).NATS_PASSWORD_FILE, 'utf8').trim() };
  }

  /** Every process of the mesh, nats-server first. */
  get all(): ChaosProcess[] {
    return [this.nats, ...this.replicas.map((r) => r.proc), ...this.agents];
  }

  /** Clients of the replicas that are running now. */
  clients(): MeshClient[] {
    return this.replicas.filter((r) => r.proc.alive).map((r) => r.client);
  }

  async liveAgents(): Promise<string[]> {
    for (const c of this.clients()) {
      const list = await listAgents(c).catch(() => undefined);
      if (list) return list.filter((a) => a.alive).map((a) => a.name);
    }
    return [];
  }

  /** Starts `p` again (it must be down) and waits until it serves. */
  async restart(p: ChaosProcess): Promise<void> {
    p.start();
    if (p === this.nats) {
      if (!(await waitForPort(this.natsPort, this.readyMs, HOST, () => p.alive))) throw new Error(`nats-server not ready within ${this.readyMs} ms`);
      return;
    }
    const replica = this.replicas.find((r) => r.proc === p);
    if (replica) return until(p.name, this.readyMs, async () => !!(await replica.client.get('/health')));
    // an agent is back when the coordinators list it alive again
    return until(p.name, this.readyMs, async () => (await this.liveAgents()).includes(p.name));
  }

  async stop(): Promise<void> {
    for (const p of [...this.agents, ...this.replicas.map((r) => r.proc), this.nats]) await p.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}

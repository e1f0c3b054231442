// The mesh the chaos soak attacks: nats-server (JetStream on disk, so a restart finds its
// streams again) or a JetStream cluster of several on loopback (routes to each other, each
// bucket replicated on min(3, N) of them), R coordinator replicas and A rank agents, each a
// ChaosProcess that keeps its name, ports and state across a SIGKILL and restart. The first
// replica started is the leader.
// Authentication is on, as `cmesh up` runs it: the nats-server admits only the mesh's logins
// (the coordinator's, one per agent named as the agent, the `client` tenant's), each held to its
// role's permissions, and the REST API asks for the token.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { freePort, until, waitForPort } from '@cmesh/testing';
import { natsClusterNodeConfig } from '@cmesh/protocol';
import { MeshClient, listAgents, CLIENT_USER, COORDINATOR_USER, MeshAuth, prepareMeshAuth, nodeArgs, programEnv, programOf } from '@cmesh/testing/mesh';
import { ChaosProcess } from './processes';

export interface ChaosMeshOptions {
  agents: number;
  replicas: number;
  /** extra environment for the coordinators and agents */
  env?: NodeJS.ProcessEnv;
  readyTimeoutMs?: number;
  /** tenant logins besides `client` (each a NATS user with the client role) */
  tenants?: string[];
  /** nats-servers: 1 (default), or a JetStream cluster of this many */
  natsNodes?: number;
}

/** One nats-server of the mesh: its process and ports (name = its server_name). */
export interface ChaosNatsNode {
  proc: ChaosProcess;
  port: number;
  httpPort: number;
}

const HOST = '127.0.0.1';

export class ChaosMesh {
  private constructor(
    readonly natsNodes: ChaosNatsNode[],
    /** every server's URL, comma-separated (NATS_URL) */
    readonly natsUrl: string,
    readonly replicas: { proc: ChaosProcess; client: MeshClient; id: string }[],
    readonly agents: ChaosProcess[],
    /** the mesh's secrets (API token, NATS passwords, the server's configuration) */
    readonly auth: MeshAuth,
    private readonly storeDir: string,
    private readonly readyMs: number,
  ) {}

  static async start(o: ChaosMeshOptions): Promise<ChaosMesh> {
    try {
      return await ChaosMesh.startOnce(o);
    } catch (e) {
      // a port another process took between its choice here and the bind: once more, on new ports
      if (!/EADDRINUSE/.test((e as Error).message)) throw e;
      return ChaosMesh.startOnce(o);
    }
  }

  private static async startOnce(o: ChaosMeshOptions): Promise<ChaosMesh> {
    const readyMs = o.readyTimeoutMs ?? 60_000;
    // JetStream's store and the secrets in one directory, removed at the end
    const storeDir = mkdtempSync(join(tmpdir(), 'cmesh-chaos-nats-'));
    const agentNames = Array.from({ length: o.agents }, (_, i) => `agent-${i}`);
    const auth = prepareMeshAuth(join(storeDir, 'state'), agentNames, undefined, o.tenants);
    const natsNodes = await natsServers(o.natsNodes ?? 1, storeDir, auth);
    const natsUrl = natsNodes.map((n) => `nats://${HOST}:${n.port}`).join(',');
    const env = { ...process.env, ...programEnv(), NO_COLOR: '1', LOG_LEVEL: 'warn', ...o.env, NATS_URL: natsUrl };
    const replicas: { proc: ChaosProcess; client: MeshClient; id: string }[] = [];
    for (let i = 0; i < o.replicas; i++) {
      const port = await freePort();
      const id = `replica-${i}`;
      const proc = new ChaosProcess({
        name: id,
        command: process.execPath,
        args: nodeArgs(programOf('@cmesh/coordinator', 'main')),
        env: {
          ...env,
          ...auth.login(COORDINATOR_USER),
          CMESH_API_TOKEN_FILE: auth.apiTokenFile,
          HTTP_PORT: String(port),
          HTTP_HOST: HOST,
          CMESH_REPLICA_ID: id,
        },
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
    const mesh = new ChaosMesh(natsNodes, natsUrl, replicas, agents, auth, storeDir, readyMs);
    try {
      for (const n of natsNodes) await mesh.restart(n.proc);
      await mesh.waitForJetStream(readyMs);
      for (const r of replicas) await mesh.restart(r.proc);
      for (const a of agents) a.start();
      await until(`${o.agents} agents`, readyMs, async () => (await mesh.liveAgents()).length === o.agents);
      return mesh;
    } catch (e) {
      // what the processes that are not up printed last
      const live: string[] = await mesh.liveAgents().catch(() => []);
      const said = mesh.all
        .filter((p) => !p.alive || (agents.includes(p) && !live.includes(p.name)))
        .map(
          (p) =>
            `${p.name}: ${
              p.tail
                .slice(-3)
                .map((t) => t.line)
                .join(' | ') || '(nothing)'
            }`,
        );
      await mesh.stop();
      throw said.length ? new Error(`${(e as Error).message}; ${said.join('; ')}`) : e;
    }
  }

  /** The tenant login service members and job submitters use (or another tenant's): NATS user and password. */
  clientLogin(user = CLIENT_USER): { user: string; pass: string } {
    return { user, pass: readFileSync(this.auth.login(user).NATS_PASSWORD_FILE, 'utf8').trim() };
  }

  /** The nats-server (the first of a cluster). */
  get nats(): ChaosProcess {
    return this.natsNodes[0].proc;
  }

  /** Every process of the mesh, the nats-servers first. */
  get all(): ChaosProcess[] {
    return [...this.natsNodes.map((n) => n.proc), ...this.replicas.map((r) => r.proc), ...this.agents];
  }

  /** A server's monitoring endpoint (/jsz, /healthz ...), JSON. */
  async monitor<T>(node: ChaosNatsNode, path: string): Promise<T> {
    const res = await fetch(`http://${HOST}:${node.httpPort}${path}`, { signal: AbortSignal.timeout(3000) });
    return (await res.json()) as T;
  }

  /** The JetStream meta leader's server name as the running servers agree on it, or undefined while they do not. */
  async metaLeader(): Promise<string | undefined> {
    if (this.natsNodes.length === 1) return this.natsNodes[0].proc.alive ? this.natsNodes[0].proc.name : undefined;
    const up = this.natsNodes.filter((n) => n.proc.alive);
    const leaders = await Promise.all(
      up.map((n) =>
        this.monitor<{ meta_cluster?: { leader?: string } }>(n, '/jsz?leader-only=false').then(
          (j) => j.meta_cluster?.leader,
          () => undefined,
        ),
      ),
    );
    return leaders.length && leaders.every((l) => l && l === leaders[0]) ? leaders[0] : undefined;
  }

  /** Waits until the running servers agree on a meta leader and each says it is healthy (JetStream included). */
  async waitForJetStream(timeoutMs: number): Promise<string> {
    let leader: string | undefined;
    await until('JetStream meta leader', timeoutMs, async () => {
      leader = await this.metaLeader();
      if (!leader) return false;
      const health = await Promise.all(
        this.natsNodes
          .filter((n) => n.proc.alive)
          .map((n) => fetch(`http://${HOST}:${n.httpPort}/healthz`, { signal: AbortSignal.timeout(3000) }).then((r) => r.status)),
      );
      return health.every((h) => h === 200);
    });
    return leader!;
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
    const nats = this.natsNodes.find((n) => n.proc === p);
    if (nats) {
      if (!(await waitForPort(nats.port, this.readyMs, HOST, () => p.alive))) throw new Error(`nats-server ${p.name} not ready within ${this.readyMs} ms`);
      return;
    }
    const replica = this.replicas.find((r) => r.proc === p);
    if (replica) {
      await until(p.name, this.readyMs, async () => !!(await replica.client.get('/health')));
      return;
    }
    // an agent is back when the coordinators list it alive again
    await until(p.name, this.readyMs, async () => (await this.liveAgents()).includes(p.name));
  }

  async stop(): Promise<void> {
    for (const p of [...this.agents, ...this.replicas.map((r) => r.proc), ...this.natsNodes.map((n) => n.proc)]) await p.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}

/**
 * The mesh's nats-servers, not started: one on its own, or `count` forming a JetStream cluster
 * (routes to every server, server names nats-0.., each its own store), each with the mesh's
 * authorization and limits. -c at every start: a restarted server admits the same logins.
 */
async function natsServers(count: number, storeDir: string, auth: MeshAuth): Promise<ChaosNatsNode[]> {
  const ports = [];
  for (let i = 0; i < count; i++) ports.push({ port: await freePort(), clusterPort: await freePort(), httpPort: await freePort() });
  const routes = ports.map((p) => `${HOST}:${p.clusterPort}`);
  return ports.map((p, i) => {
    const name = count === 1 ? 'nats' : `nats-${i}`;
    let conf = auth.natsConf;
    if (count > 1) {
      conf = join(storeDir, `${name}.conf`);
      const extra = readFileSync(auth.natsConf, 'utf8');
      writeFileSync(
        conf,
        natsClusterNodeConfig({ serverName: name, host: HOST, port: p.port, clusterPort: p.clusterPort, httpPort: p.httpPort, routes, extra }),
        { mode: 0o600 },
      );
    }
    const listen = count > 1 ? [] : ['-a', HOST, '-p', String(p.port), '-m', String(p.httpPort)];
    return {
      proc: new ChaosProcess({ name, command: 'nats-server', args: ['-c', conf, '-js', ...listen, '-sd', join(storeDir, name === 'nats' ? 'js' : name)] }),
      port: p.port,
      httpPort: p.httpPort,
    };
  });
}

// `cmesh up` as a function: nats-server (the Debian binary, JetStream on, unless a URL is
// given), the coordinator and N rank agents as child processes of this one, each ready before
// the next starts. Everything is stopped by pid on stop(), on a failure while starting, and when
// a child dies while the mesh is up (with `restart`, only when it keeps dying: a child that
// dies is started again alone).
import { mkdtempSync, rmSync } from 'fs';
import { connect as netConnect } from 'net';
import { tmpdir } from 'os';
import { join } from 'path';
import { freePort } from '@cmesh/collectives';
import { checkClusterName } from '@cmesh/protocol';
import { nodeArgs, programEnv, programOf, requireMeshPackages } from '../programs';
import { MeshClient } from './client';
import { startLocalNatsCluster, LocalNatsServer, natsHealthy } from './local-nats-cluster';
import { COORDINATOR_USER, MeshAuth, prepareMeshAuth } from './mesh-auth';
import { Supervisor } from './supervisor';

export interface MeshOptions {
  agents: number;
  /** use this NATS server instead of starting one */
  natsUrl?: string;
  /** port of the nats-server we start (0: any free port); of the first one with natsCluster */
  natsPort?: number;
  /**
   * start this many nats-servers forming one JetStream cluster (3: any one of them may stop)
   * instead of one; the coordinator and the agents are given all of their URLs
   */
  natsCluster?: number;
  /** coordinator HTTP port (0: any free port) */
  port?: number;
  host?: string;
  /** the cluster the coordinator and agents belong to (CMESH_CLUSTER; default: the default cluster) */
  cluster?: string;
  /** line sink for the children's prefixed output */
  write?: (line: string) => void;
  /** how long each part may take to become ready */
  readyTimeoutMs?: number;
  /** extra environment for the agents */
  agentEnv?: NodeJS.ProcessEnv;
  /** extra environment for agent i (over agentEnv): e.g. CMESH_NODE_NAME, to play several nodes on one machine */
  agentEnvFor?: (i: number) => NodeJS.ProcessEnv;
  /** extra environment for the coordinator and the agents */
  env?: NodeJS.ProcessEnv;
  /** restart a child that dies (see Supervisor) instead of stopping the mesh */
  restart?: boolean;
  /**
   * Authentication on: the secrets in this state directory (made at first start, see
   * mesh-auth.ts): the nats-server we start admits only the mesh's users, each with its role's
   * permissions, and the coordinator's REST API asks for the token. With `natsUrl`, only the API
   * token (log in to that server with NATS_USER and NATS_PASSWORD[_FILE] in `env`). Unset: no
   * authentication (what tests and `--no-auth` ask for).
   */
  auth?: { stateDir: string; tenants?: string[] };
}

export interface Mesh {
  /** the server, or every server of the cluster, comma-separated (the children's NATS_URL) */
  natsUrl: string;
  /** the servers we started with natsCluster: ports, pid files (`nats-server --signal ldm=<pid file>`) */
  natsServers?: LocalNatsServer[];
  /** the secrets, when started with `auth` */
  auth?: MeshAuth;
  coordinatorUrl: string;
  client: MeshClient;
  supervisor: Supervisor;
  agentNames: string[];
  /** resolves with a description when a child dies (and is not restarted) while the mesh is up */
  died: Promise<string>;
  stop(): Promise<void>;
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, died?: () => string | null): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const d = died?.();
    if (d) throw new Error(`${what}: ${d}`);
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms${last ? ` (${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tcpOpen(host: string, port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const s = netConnect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(undefined));
  });
}

export async function startMesh(opts: MeshOptions): Promise<Mesh> {
  requireMeshPackages(); // before anything starts: the launcher alone lacks the mesh's packages
  const host = opts.host ?? '127.0.0.1';
  const readyMs = opts.readyTimeoutMs ?? 60_000;
  const supervisor = new Supervisor(opts.write);
  let deathReason: string | null = null;
  let onDeath: (why: string) => void = () => undefined;
  const died = new Promise<string>((r) => (onDeath = r));
  supervisor.onUnexpectedExit((c, code, signal) => {
    deathReason = `${c.name} (pid ${c.proc.pid}) exited with ${signal ?? `code ${code}`}`;
    onDeath(deathReason);
  });
  let storeDir: string | null = null;
  const env = { ...programEnv(), NO_COLOR: '1', ...opts.env, ...(opts.cluster ? { CMESH_CLUSTER: checkClusterName(opts.cluster) } : {}) };
  const stop = async () => {
    await supervisor.stopAll();
    if (storeDir) rmSync(storeDir, { recursive: true, force: true });
    storeDir = null;
  };
  // Until the caller holds the mesh (holdMesh / withMesh), a signal aborts the start-up (the waits
  // below see deathReason) and an exit kills what was started: no child outlives a Ctrl-C.
  const lastResort = () => supervisor.killAllNow();
  const onSignal = (signal: NodeJS.Signals) => {
    deathReason = `${signal} received during start-up`;
    onDeath(deathReason);
  };
  process.on('exit', lastResort);
  for (const s of STARTUP_SIGNALS) process.on(s, onSignal);
  try {
    const agentNames = Array.from({ length: opts.agents }, (_, i) => `agent-${i}`);
    const auth = opts.auth ? prepareMeshAuth(opts.auth.stateDir, agentNames, opts.cluster, opts.auth.tenants) : undefined;
    let natsUrl = opts.natsUrl;
    let natsServers: LocalNatsServer[] | undefined;
    const ownNats = !natsUrl;
    if (!natsUrl && (opts.natsCluster ?? 1) > 1) {
      storeDir = mkdtempSync(join(tmpdir(), 'cmesh-nats-'));
      const servers = await startLocalNatsCluster(supervisor, {
        size: opts.natsCluster!,
        host,
        firstPort: opts.natsPort ?? 0,
        dir: storeDir,
        natsConf: auth?.natsConf,
        routeAuth: auth?.routeAuth(),
        restart: opts.restart,
      });
      natsServers = servers;
      for (const s of servers)
        await until(
          `nats-server ${s.name}`,
          readyMs,
          () => natsHealthy(host, s),
          () => deathReason,
        );
      natsUrl = servers.map((s) => s.url).join(',');
    } else if (!natsUrl) {
      const port = opts.natsPort || (await freePort(host));
      storeDir = mkdtempSync(join(tmpdir(), 'cmesh-nats-'));
      const conf = auth ? ['-c', auth.natsConf] : [];
      supervisor.start({
        name: 'nats',
        stage: 0,
        restart: opts.restart,
        command: 'nats-server',
        args: [...conf, '-js', '-a', host, '-p', String(port), '-sd', storeDir],
      });
      await until(
        'nats-server',
        readyMs,
        () => tcpOpen(host, port),
        () => deathReason,
      );
      natsUrl = `nats://${host}:${port}`;
    }
    const httpPort = opts.port || (await freePort(host));
    const coordinatorUrl = `http://${host}:${httpPort}`;
    supervisor.start({
      name: 'coordinator',
      stage: 1,
      restart: opts.restart,
      command: process.execPath,
      args: nodeArgs(programOf('@cmesh/coordinator', 'main')),
      env: {
        ...env,
        ...(auth ? { CMESH_API_TOKEN_FILE: auth.apiTokenFile } : {}),
        ...(auth && ownNats ? auth.login(COORDINATOR_USER) : {}),
        NATS_URL: natsUrl,
        HTTP_PORT: String(httpPort),
        HTTP_HOST: host,
      },
    });
    const client = new MeshClient(coordinatorUrl, undefined, auth?.apiToken);
    await until(
      'coordinator',
      readyMs,
      async () => ((await client.get('/health')) ? true : undefined),
      () => deathReason,
    );
    agentNames.forEach((name, i) =>
      supervisor.start({
        name,
        stage: 2,
        restart: opts.restart,
        command: process.execPath,
        args: nodeArgs(programOf('@cmesh/rank-agent', 'main')),
        env: {
          ...env,
          ...opts.agentEnv,
          ...opts.agentEnvFor?.(i),
          ...(auth && ownNats ? auth.login(name) : {}),
          NATS_URL: natsUrl,
          CMESH_AGENT_NAME: name,
          CMESH_DEVICE_INDEX: String(i),
          CMESH_AGENT_HOST: host,
        },
      }),
    );
    await until(
      `${opts.agents} agents`,
      readyMs,
      async () => {
        const alive = new Set((await listAgents(client)).filter((a) => a.alive && agentNames.includes(a.name)).map((a) => a.name));
        return alive.size === opts.agents ? true : undefined;
      },
      () => deathReason,
    );
    return { natsUrl, natsServers, auth, coordinatorUrl, client, supervisor, agentNames, died, stop };
  } catch (e) {
    await stop();
    throw e;
  } finally {
    for (const s of STARTUP_SIGNALS) process.removeListener(s, onSignal);
    process.removeListener('exit', lastResort);
  }
}

const STARTUP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export interface AgentRow {
  agentId: string;
  name: string;
  alive: boolean;
  state: string;
  backends: string;
  lastHeartbeat?: string;
  host?: string;
  /** the node it registered (CMESH_NODE_NAME); absent from agents that named none */
  node?: string;
}

/** The coordinator's agent list, normalised for the CLI. */
export async function listAgents(client: MeshClient): Promise<AgentRow[]> {
  const body = await client.get<unknown>('/agents');
  const list = (Array.isArray(body) ? body : ((body as { agents?: unknown[] })?.agents ?? [])) as Record<string, unknown>[];
  return list.map(normaliseAgent);
}

export function normaliseAgent(a: Record<string, unknown>): AgentRow {
  const state = String(a.state ?? a.status ?? 'unknown');
  const backends = a.backends;
  let b = '';
  if (Array.isArray(backends)) b = backends.map((x) => (typeof x === 'string' ? x : describeBackend(x as Record<string, unknown>))).join(', ');
  else if (backends && typeof backends === 'object') {
    b = Object.entries(backends as Record<string, unknown>)
      .map(([k, v]) => describeBackend({ name: k, ...(typeof v === 'object' ? (v as object) : { ok: !!v }) }))
      .join(', ');
  }
  return {
    agentId: String(a.agentId ?? a.id ?? a.name),
    name: String(a.name ?? a.agentId ?? a.id),
    alive: a.alive !== undefined ? Boolean(a.alive) : !/lost|dead|gone|deregistered/i.test(state),
    state,
    backends: b,
    lastHeartbeat: typeof a.lastHeartbeat === 'string' ? a.lastHeartbeat : typeof a.lastSeen === 'string' ? a.lastSeen : undefined,
    host: typeof a.host === 'string' ? a.host : undefined,
    ...(typeof a.node === 'string' ? { node: a.node } : {}),
  };
}

function describeBackend(x: Record<string, unknown>): string {
  const name = String(x.name ?? x.backend ?? '?');
  const ok = x.ok ?? x.available;
  return ok === false ? `${name} (unavailable${x.reason ? `: ${x.reason}` : ''})` : name;
}

// A JetStream cluster of real nats-servers (Debian package) on free loopback ports: each server
// with its own client, cluster (route) and monitoring port and its own store directory, routes to
// all of them, optionally a route login and any configuration besides (the mesh's
// `authorization` block, say). A server can be SIGKILLed, stopped, put into lame duck mode and
// started again on the same ports and store, as a chaos driver or a rolling restart needs.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { natsClusterNodeConfig, NatsRouteAuth } from '@cmesh/protocol';
import { freePort, waitForPort } from './free-port';

/** What /jsz says about the JetStream meta group (the cluster's RAFT group of servers). */
export interface JetStreamMeta {
  /** server_name of the meta leader, if one is elected */
  leader?: string;
  /** cluster_size as this server sees it */
  clusterSize: number;
  /** the other peers and whether each is current (caught up) and online */
  replicas: { name: string; current: boolean; offline: boolean }[];
}

export interface NatsClusterNode {
  name: string;
  /** client URL of this server alone */
  url: string;
  port: number;
  clusterPort: number;
  httpPort: number;
  storeDir: string;
  confFile: string;
  pidFile: string;
  pid(): number | undefined;
  running(): boolean;
  /** starts it (again) on its ports and store; resolves once it accepts clients */
  start(): Promise<void>;
  /** sends `signal` (SIGKILL by default) and waits for it to exit */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** `nats-server --signal ldm=<pid file>`: lame duck mode (clients are moved off, then it exits) */
  lameDuck(timeoutMs?: number): Promise<void>;
  /** GET on its monitoring port: /healthz, /varz, /jsz ...; JSON, and the HTTP status */
  monitor<T = Record<string, unknown>>(path: string): Promise<{ status: number; body: T }>;
  meta(): Promise<JetStreamMeta>;
}

export interface NatsCluster {
  nodes: NatsClusterNode[];
  /** every server's client URL, comma-separated (NATS_URL of a cluster) */
  url: string;
  urls: string[];
  /** the meta leader's name once every running server sees one leader and all peers current */
  waitForJetStream(timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

export interface NatsClusterOptions {
  size?: number;
  /** configuration appended to every server's (an `authorization` block, JetStream limits) */
  config?: string;
  /** the route login; without it the cluster port admits any server (loopback only here) */
  routeAuth?: NatsRouteAuth;
  host?: string;
  binary?: string;
  timeoutMs?: number;
  /** nats-server's own log lines go here (default: nowhere) */
  log?: (line: string) => void;
  /** lame_duck_duration (nats-server's minimum is 30 s) and grace period, e.g. '30s', '2s' */
  lameDuck?: { duration: string; grace: string };
}

const exitOf = (p: ChildProcess) => new Promise<void>((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once('exit', () => r())));

/** Starts `size` (3) servers forming one JetStream cluster; resolves once a meta leader is elected. */
export async function startNatsCluster(opts: NatsClusterOptions = {}): Promise<NatsCluster> {
  const size = opts.size ?? 3;
  const host = opts.host ?? '127.0.0.1';
  const binary = opts.binary ?? 'nats-server';
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const root = mkdtempSync(join(tmpdir(), 'cmesh-nats-cluster-'));
  const ports: { port: number; clusterPort: number; httpPort: number }[] = [];
  const taken = new Set<number>();
  const pick = async () => {
    for (;;) {
      const p = await freePort(host);
      if (!taken.has(p)) return (taken.add(p), p);
    }
  };
  for (let i = 0; i < size; i++) ports.push({ port: await pick(), clusterPort: await pick(), httpPort: await pick() });
  const routes = ports.map((p) => `${host}:${p.clusterPort}`);

  const nodes = ports.map((p, i): NatsClusterNode => {
    const name = `n${i}`;
    const storeDir = join(root, name);
    const confFile = join(root, `${name}.conf`);
    const pidFile = join(root, `${name}.pid`);
    writeFileSync(
      confFile,
      natsClusterNodeConfig({
        serverName: name,
        host,
        port: p.port,
        clusterPort: p.clusterPort,
        httpPort: p.httpPort,
        routes,
        routeAuth: opts.routeAuth,
        pidFile,
        lameDuck: opts.lameDuck,
        extra: opts.config,
      }),
      { mode: 0o600 },
    );
    let proc: ChildProcess | undefined;
    const running = () => !!proc && proc.exitCode === null && proc.signalCode === null;
    const node: NatsClusterNode = {
      name,
      url: `nats://${host}:${p.port}`,
      ...p,
      storeDir,
      confFile,
      pidFile,
      pid: () => (running() ? proc!.pid : undefined),
      running,
      async start() {
        if (running()) return;
        const child = spawn(binary, ['-c', confFile, '-js', '-sd', storeDir], { stdio: ['ignore', 'pipe', 'pipe'] });
        proc = child;
        const spawnError = new Promise<Error>((r) => child.once('error', r));
        for (const s of [child.stdout!, child.stderr!]) {
          let buf = '';
          s.on('data', (d: Buffer) => {
            buf += d.toString();
            const lines = buf.split('\n');
            buf = lines.pop()!;
            for (const l of lines) opts.log?.(`[${name}] ${l}`);
          });
        }
        const ready = await Promise.race([
          waitForPort(p.port, timeoutMs, host, () => child.exitCode === null && child.signalCode === null),
          spawnError.then((e) => {
            throw new Error(`cannot start nats-server (is the Debian package installed?): ${e.message}`);
          }),
        ]);
        if (!ready) throw new Error(`nats-server ${name} did not start on port ${p.port} (exit ${child.exitCode ?? child.signalCode})`);
      },
      async kill(signal: NodeJS.Signals = 'SIGKILL') {
        if (!running()) return;
        const done = exitOf(proc!);
        proc!.kill(signal);
        const hard = setTimeout(() => running() && proc!.kill('SIGKILL'), 10_000);
        await done;
        clearTimeout(hard);
      },
      async lameDuck(ldmTimeoutMs = 60_000) {
        if (!running()) return;
        const done = exitOf(proc!);
        const r = spawnSync(binary, [`--signal`, `ldm=${pidFile}`], { encoding: 'utf8', timeout: 10_000 });
        if (r.status !== 0) throw new Error(`nats-server --signal ldm=${pidFile}: ${r.stderr || r.error?.message}`);
        const late = new Promise<'late'>((res) => setTimeout(() => res('late'), ldmTimeoutMs).unref());
        if ((await Promise.race([done, late])) === 'late') throw new Error(`nats-server ${name} still running ${ldmTimeoutMs} ms after lame duck mode`);
      },
      async monitor<T>(path: string) {
        const res = await fetch(`http://${host}:${p.httpPort}${path}`, { signal: AbortSignal.timeout(5000) });
        return { status: res.status, body: (await res.json()) as T };
      },
      async meta() {
        const { body } = await node.monitor<{
          meta_cluster?: { leader?: string; cluster_size?: number; replicas?: { name: string; current?: boolean; offline?: boolean }[] };
        }>('/jsz');
        const m = body.meta_cluster ?? {};
        return {
          leader: m.leader,
          clusterSize: m.cluster_size ?? 0,
          replicas: (m.replicas ?? []).map((r) => ({ name: r.name, current: !!r.current, offline: !!r.offline })),
        };
      },
    };
    return node;
  });

  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill('SIGTERM')));
    rmSync(root, { recursive: true, force: true });
  };

  const waitForJetStream = async (waitMs = timeoutMs) => {
    const deadline = Date.now() + waitMs;
    let last = '';
    for (;;) {
      try {
        const up = nodes.filter((n) => n.running());
        const metas = await Promise.all(up.map((n) => n.meta()));
        const leaders = new Set(metas.map((m) => m.leader));
        const healthy = await Promise.all(up.map((n) => n.monitor('/healthz').then((h) => h.status === 200)));
        const [leader] = leaders;
        const leaderMeta = metas[up.findIndex((n) => n.name === leader)];
        const peersCurrent = leaderMeta?.replicas.filter((r) => up.some((n) => n.name === r.name)).every((r) => r.current && !r.offline);
        if (leaders.size === 1 && leader && healthy.every(Boolean) && peersCurrent && metas.every((m) => m.clusterSize === size)) return leader;
        last = `leaders ${[...leaders].join(',') || 'none'}, healthy ${healthy.join(',')}`;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() > deadline) throw new Error(`the NATS cluster has no JetStream meta leader within ${waitMs} ms (${last})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  try {
    await Promise.all(nodes.map((n) => n.start()));
    await waitForJetStream();
  } catch (e) {
    await stop();
    throw e;
  }
  const urls = nodes.map((n) => n.url);
  return { nodes, urls, url: urls.join(','), waitForJetStream, stop };
}

// `cmesh up --nats-cluster N`: N nats-servers on this machine forming one JetStream cluster, as
// NATS runs in production but on loopback ports: each with its client port, its cluster (route)
// port and its monitoring port, its own store directory, routes to all of them with the route
// login (with authentication on) and the mesh's `authorization` block and JetStream limits.
// Ready once every server answers /healthz (JetStream current, a meta leader elected).
import { mkdirSync, readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import { freePort } from '@cmesh/collectives';
import { natsClusterNodeConfig, NatsRouteAuth } from '@cmesh/protocol';
import { Supervisor } from './supervisor';

export interface LocalNatsClusterOptions {
  size: number;
  host: string;
  /** client port of the first server (0: any free port); the others take free ports */
  firstPort: number;
  /** where the configurations (0600: they hold the route password) and the stores go */
  dir: string;
  /** the mesh's nats-server configuration (authorization, JetStream limits), when auth is on */
  natsConf?: string;
  routeAuth?: NatsRouteAuth;
  restart?: boolean;
}

export interface LocalNatsServer {
  name: string;
  url: string;
  port: number;
  clusterPort: number;
  httpPort: number;
  pidFile: string;
}

/**
 * Lame duck mode on one machine: its few clients are moved off within seconds (nats-server's
 * defaults, 2 minutes and a 10 s grace period, suit a server with thousands of clients).
 */
const LOCAL_LAME_DUCK = { duration: '30s', grace: '2s' };

/** Starts the servers under `supervisor` (stage 0, named nats-<i>); returns them at once. */
export async function startLocalNatsCluster(supervisor: Supervisor, o: LocalNatsClusterOptions): Promise<LocalNatsServer[]> {
  const taken = new Set<number>(o.firstPort ? [o.firstPort] : []);
  const pick = async () => {
    for (;;) {
      const p = await freePort(o.host);
      if (!taken.has(p)) return (taken.add(p), p);
    }
  };
  const servers: LocalNatsServer[] = [];
  for (let i = 0; i < o.size; i++) {
    const port = i === 0 && o.firstPort ? o.firstPort : await pick();
    servers.push({
      name: `nats-${i}`,
      url: `nats://${o.host}:${port}`,
      port,
      clusterPort: await pick(),
      httpPort: await pick(),
      pidFile: join(o.dir, `nats-${i}.pid`),
    });
  }
  const routes = servers.map((s) => `${o.host}:${s.clusterPort}`);
  const extra = o.natsConf ? readFileSync(o.natsConf, 'utf8') : '';
  for (const s of servers) {
    const storeDir = join(o.dir, s.name);
    mkdirSync(storeDir, { recursive: true, mode: 0o700 });
    const conf = join(o.dir, `${s.name}.conf`);
    writeFileSync(
      conf,
      natsClusterNodeConfig({
        serverName: s.name,
        host: o.host,
        port: s.port,
        clusterPort: s.clusterPort,
        httpPort: s.httpPort,
        routes,
        routeAuth: o.routeAuth,
        pidFile: s.pidFile,
        lameDuck: LOCAL_LAME_DUCK,
        extra,
      }),
      { mode: 0o600 },
    );
    supervisor.start({ name: s.name, stage: 0, restart: o.restart, command: 'nats-server', args: ['-c', conf, '-js', '-sd', storeDir] });
  }
  return servers;
}

/** True once `server` says it is healthy: JetStream enabled and current, a meta leader known. */
export async function natsHealthy(host: string, server: LocalNatsServer): Promise<true | undefined> {
  const res = await fetch(`http://${host}:${server.httpPort}/healthz`, { signal: AbortSignal.timeout(2000) });
  return res.status === 200 ? true : undefined;
}

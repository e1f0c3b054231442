// A JetStream cluster of nats-servers (three, as NATS runs in production): what each server's
// configuration says about the cluster. Servers connect to each other on their cluster port
// (routes, 6222 by NATS's convention) and log in there as the route user, a login of its own that
// no client has; every server lists every server's route (its own included: nats-server skips
// itself), so any one of them can start first or come back alone.

/** The route login: servers of the cluster log in to each other's cluster port as this user. */
export const NATS_ROUTE_USER = 'route';
/** NATS's conventional cluster (route) port. */
export const NATS_ROUTE_PORT = 6222;
/** The name the mesh's NATS clusters carry (nats-server's `cluster.name`; every server the same). */
export const NATS_CLUSTER_NAME = 'cmesh';

export interface NatsRouteAuth {
  user?: string;
  password: string;
}

/** A route URL with the route login in it: routes authenticate through the URL's user info. */
export function natsRouteUrl(hostPort: string, auth?: NatsRouteAuth): string {
  if (!/^[A-Za-z0-9.-]+:\d{1,5}$/.test(hostPort)) throw new Error(`NATS route ${JSON.stringify(hostPort)}: host:port expected`);
  if (!auth) return `nats-route://${hostPort}`;
  const user = auth.user ?? NATS_ROUTE_USER;
  return `nats-route://${encodeURIComponent(user)}:${encodeURIComponent(auth.password)}@${hostPort}`;
}

/**
 * The body of a nats-server `cluster { }` block that depends on the secrets: the route login the
 * cluster port asks for and the routes to every server, each with that login (nats-server reads
 * no variables inside a URL, so the password is written into them: this text is a secret).
 * Included from the `cluster` block of the configuration (`include ./routes.conf`), or inlined.
 */
export function natsRoutes(routes: string[], auth?: NatsRouteAuth): string {
  if (routes.length === 0) throw new Error('a NATS cluster needs at least one route');
  const lines = [];
  if (auth) lines.push(`authorization: ${JSON.stringify({ user: auth.user ?? NATS_ROUTE_USER, password: auth.password })}`);
  lines.push(
    `routes: ${JSON.stringify(
      routes.map((r) => natsRouteUrl(r, auth)),
      null,
      2,
    )}`,
  );
  return lines.join('\n') + '\n';
}

export interface NatsClusterNodeConfig {
  /** server_name: JetStream's peers are known by it, so it must stay the same across restarts */
  serverName: string;
  host: string;
  port: number;
  clusterPort: number;
  /** monitoring port (/healthz, /varz, /jsz) */
  httpPort: number;
  /** host:port of every server's cluster port */
  routes: string[];
  routeAuth?: NatsRouteAuth;
  clusterName?: string;
  /** nats-server writes its pid here (`nats-server --signal ldm=<file>` finds it) */
  pidFile?: string;
  /**
   * lame duck mode (`nats-server --signal ldm=<pid>`): its clients are closed over this long (at
   * least '30s' for nats-server), after the grace period (e.g. '2s') in which it takes no new ones
   */
  lameDuck?: { duration: string; grace: string };
  /** appended as it is: the `authorization` block and the JetStream limits, say */
  extra?: string;
}

/**
 * A whole nats-server configuration for one server of a local cluster (one machine, loopback).
 * JetStream is left to the command line (`-js -sd <dir>`): a `jetstream` block in `extra` (the
 * mesh's limits) would replace one written here, while the flags apply on top of either.
 */
export function natsClusterNodeConfig(c: NatsClusterNodeConfig): string {
  const q = JSON.stringify;
  return [
    `server_name: ${q(c.serverName)}`,
    `listen: ${q(`${c.host}:${c.port}`)}`,
    `http: ${q(`${c.host}:${c.httpPort}`)}`,
    ...(c.pidFile ? [`pid_file: ${q(c.pidFile)}`] : []),
    ...(c.lameDuck ? [`lame_duck_duration: ${q(c.lameDuck.duration)}`, `lame_duck_grace_period: ${q(c.lameDuck.grace)}`] : []),
    'cluster {',
    `  name: ${q(c.clusterName ?? NATS_CLUSTER_NAME)}`,
    `  listen: ${q(`${c.host}:${c.clusterPort}`)}`,
    ...natsRoutes(c.routes, c.routeAuth)
      .trimEnd()
      .split('\n')
      .map((l) => `  ${l}`),
    '}',
    c.extra ?? '',
  ].join('\n');
}

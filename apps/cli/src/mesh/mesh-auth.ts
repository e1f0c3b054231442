// The secrets of a mesh `cmesh up` starts (and of compose's secrets volume): generated at first
// start into the state directory (a 0700 directory, 0600 files created exclusively, so an existing
// secret is never replaced) or supplied there beforehand, then read on every start: the
// coordinator's API token, one NATS password per user (the coordinator, one per agent, named as
// the agent, and one per tenant: `client` and any others), and the nats-server configuration
// rendered from them with each user's permissions.
import { randomBytes } from 'crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'fs';
import { basename, join } from 'path';
import {
  clusterNames,
  DEFAULT_CLIENT_USER,
  deploymentNatsUsers,
  natsAuthorization,
  NATS_CLUSTER_NAME,
  NATS_ROUTE_PORT,
  NATS_ROUTE_USER,
  NatsRouteAuth,
  natsRoutes,
} from '@cmesh/protocol';
import { MIN_SECRET_LENGTH } from '@cmesh/protocol/kit';
import { stateDirFiles } from './state-dir';

export interface MeshAuth {
  stateDir: string;
  apiToken: string;
  apiTokenFile: string;
  /** nats-server configuration file (the `authorization` block) */
  natsConf: string;
  /** what a process logs in to NATS with: NATS_USER and NATS_PASSWORD_FILE */
  login(user: string): { NATS_USER: string; NATS_PASSWORD_FILE: string };
  /**
   * the route login of a NATS cluster's servers, made at first use: its password in
   * nats/cluster.route-password, a name no client login's file (`<user>.password`) can have
   */
  routeAuth(): NatsRouteAuth;
  /**
   * Writes, beside natsConf, a server's configuration in a cluster of containers (compose):
   * nats/routes.conf (the route login, the routes to `routes`, host:port each) and
   * nats/nats-cluster.conf, which includes natsConf and routes.conf and takes its server_name from
   * the variable SERVER_NAME; returns the latter's path.
   */
  writeClusterConf(routes: string[]): string;
}

export const COORDINATOR_USER = 'coordinator';
/** The route login's password file in the nats directory (see MeshAuth.routeAuth). */
export const ROUTE_PASSWORD_FILE = 'cluster.route-password';
export const CLIENT_USER = DEFAULT_CLIENT_USER;

/**
 * What JetStream may hold on this server in all: no login can make the server's memory or disk
 * fill up past these (every stream is the coordinator's, each store bucket has its own limit).
 */
const JETSTREAM_LIMITS = 'jetstream {\n  max_memory_store: 1GB\n  max_file_store: 8GB\n}\n';

/** A server of a cluster of containers: its name from SERVER_NAME, the rest from the files beside it. */
function clusterConf(natsConf: string): string {
  return [
    '# made by cmesh secrets init --nats-routes; rewritten at every start',
    "# the container's name (nats, nats-1, ...): JetStream knows its peers by it",
    'server_name: $SERVER_NAME',
    '# lame duck mode (SIGUSR2: compose stops these servers with it): clients move to the others',
    'lame_duck_duration: 30s',
    'lame_duck_grace_period: 2s',
    `include ./${natsConf}`,
    'cluster {',
    `  name: ${NATS_CLUSTER_NAME}`,
    `  port: ${NATS_ROUTE_PORT}`,
    '  include ./routes.conf',
    '}',
    '',
  ].join('\n');
}

function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // an existing directory others can read would expose the secrets in it
  if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/** The secret in `file`, made (32 random bytes, base64url, mode 0600) when there is none yet. */
function secretIn(file: string): string {
  if (!existsSync(file)) {
    try {
      writeFileSync(file, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e; // another start made it first
    }
  }
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const value = readFileSync(file, 'utf8').trim();
  // names the file, never what is in it
  if (value.length < MIN_SECRET_LENGTH) throw new Error(`${file} holds ${value.length} characters; a secret needs at least ${MIN_SECRET_LENGTH}`);
  return value;
}

/**
 * The mesh's secrets in `stateDir`, made where missing: one NATS user per agent (named as the
 * agent) and per tenant (`client` always; `tenants` besides).
 */
export function prepareMeshAuth(stateDir: string, agentNames: string[], cluster?: string, tenants: string[] = []): MeshAuth {
  const f = stateDirFiles({}, stateDir);
  privateDir(f.dir);
  privateDir(f.natsDir);
  const passwordFile = (user: string) => join(f.natsDir, `${user}.password`);
  const users = deploymentNatsUsers(agentNames, tenants, (user) => secretIn(passwordFile(user)));
  const conf = `# made by cmesh up / cmesh secrets init from the password files beside it; rewritten at every start\n${JETSTREAM_LIMITS}${natsAuthorization(users, clusterNames(cluster))}`;
  writeFileSync(f.natsConf, conf, { mode: 0o600 });
  chmodSync(f.natsConf, 0o600);
  const routeAuth = (): NatsRouteAuth => ({ user: NATS_ROUTE_USER, password: secretIn(join(f.natsDir, ROUTE_PASSWORD_FILE)) });
  return {
    stateDir: f.dir,
    apiToken: secretIn(f.apiToken),
    apiTokenFile: f.apiToken,
    natsConf: f.natsConf,
    login: (user) => ({ NATS_USER: user, NATS_PASSWORD_FILE: passwordFile(user) }),
    routeAuth,
    writeClusterConf: (routes) => {
      const routesConf = join(f.natsDir, 'routes.conf');
      writeFileSync(routesConf, natsRoutes(routes, routeAuth()), { mode: 0o600 });
      chmodSync(routesConf, 0o600);
      const file = join(f.natsDir, 'nats-cluster.conf');
      writeFileSync(file, clusterConf(basename(f.natsConf)), { mode: 0o600 });
      chmodSync(file, 0o600);
      return file;
    },
  };
}

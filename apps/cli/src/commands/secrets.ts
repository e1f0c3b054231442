// `cmesh secrets`: the secrets of a deployment with authentication on.
//   cmesh secrets init DIR   makes them where missing (compose's auth-init service runs it on the
//                            secrets volume at every start): the API token, one NATS password per
//                            login (the coordinator, each agent, each tenant) and the nats-server
//                            configuration with each login's permissions
//   cmesh secrets k8s        prints the Kubernetes Secrets k8s/base reads, with fresh values (or
//                            the ones of --keep, so adding an agent or a tenant rotates nothing)
// Values are never printed, except into the Secret manifests, which are written to stdout for
// kubectl: `cmesh secrets k8s | kubectl apply --server-side -f -` (see K8S_SECRETS_APPLY).
import { randomBytes } from 'crypto';
import { readFileSync } from 'fs';
import { Command } from 'commander';
import {
  checkClusterName,
  clusterNames,
  deploymentNatsUsers,
  natsAuthorization,
  NATS_ROUTE_PORT,
  NATS_ROUTE_USER,
  natsRoutes,
  nodeAgentNames,
} from '@cmesh/protocol';
import { MIN_SECRET_LENGTH } from '@cmesh/protocol/kit';
import { prepareMeshAuth, ROUTE_PASSWORD_FILE } from '../mesh/mesh-auth';
import { UsageError } from '../usage';

/**
 * The Secrets k8s/base reads. `auth`: the API token, the coordinator's and the tenants' NATS
 * passwords (the coordinator's pods read their keys); `agents`: one NATS password per agent pod,
 * mounted as files into the agents' pods (never the coordinator's or a tenant's); `nats`:
 * nats-server's `auth.conf`, mounted beside its nats.conf.
 */
export const K8S_SECRETS = { auth: 'cmesh-auth', agents: 'cmesh-agent-auth', nats: 'cmesh-nats-auth' } as const;
/** The StatefulSet of the agents: its pod names (`rank-agent-<ordinal>`) are the agents' ids and NATS users. */
export const K8S_AGENT_STATEFULSET = 'rank-agent';
export const K8S_API_TOKEN_KEY = 'api-token';
/** The NATS StatefulSet and its headless Service: its pods route to each other as nats-<i>.nats-headless. */
export const K8S_NATS_STATEFULSET = 'nats';
export const K8S_NATS_HEADLESS = 'nats-headless';
/** The route login's password in cmesh-nats-auth (kept with --keep: every server must have the same). */
export const K8S_ROUTE_PASSWORD_KEY = 'nats-route-password';
/** The GPU overlay's default count of GPUs (agents) per node (its CMESH_DEVICES). */
export const K8S_GPUS_PER_NODE = 8;
/**
 * How the Secrets are applied: server-side, which keeps no `last-applied-configuration`
 * annotation (a client-side `kubectl apply` writes the whole object into it, the passwords in
 * plain text for anyone who may read the Secret's metadata). The values go in `data` (base64),
 * which server-side apply handles; `stringData` it does not handle well.
 */
export const K8S_SECRETS_APPLY = 'kubectl apply --server-side -f -';
export const natsPasswordKey = (user: string) => `nats-password-${user}`;
export const agentNames = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

const MAX_AGENTS = 1024;

function count(name: string, v: string, min = 1): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > MAX_AGENTS)
    throw new UsageError(`${name} must be an integer in [${min}, ${MAX_AGENTS}], got ${JSON.stringify(v)}`);
  return n;
}

/** Kubernetes node names (DNS-1123 subdomains), comma-separated, the flag repeatable. */
function gpuNodes(values: string[]): string[] {
  const nodes = values
    .flatMap((v) => v.split(','))
    .map((n) => n.trim())
    .filter(Boolean);
  for (const n of nodes)
    if (n.length > 253 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(n))
      throw new UsageError(`--gpu-nodes ${JSON.stringify(n)}: not a Kubernetes node name (lower-case letters, digits, - and .)`);
  return [...new Set(nodes)];
}

const collect = (v: string, all: string[]) => [...all, v];

/** Tenants' NATS users: valid names, none one of the deployment's own logins. */
function checkTenants(tenants: string[], agents: string[]): string[] {
  for (const t of tenants) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(t)) throw new UsageError(`--tenant ${JSON.stringify(t)}: letters, digits, _ and - only (1..64)`);
    if (t === 'coordinator' || agents.includes(t)) throw new UsageError(`--tenant ${JSON.stringify(t)}: the name of one of the deployment's own logins`);
  }
  return [...new Set(tenants)];
}

/** --nats-routes: host:port of every server of the cluster, comma-separated. */
function routeList(v: string): string[] {
  const routes = v
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (routes.length < 2) throw new UsageError(`--nats-routes ${JSON.stringify(v)}: the cluster's servers, host:port each, comma-separated (two or more)`);
  for (const r of routes) if (!/^[A-Za-z0-9.-]+:\d{1,5}$/.test(r)) throw new UsageError(`--nats-routes: ${JSON.stringify(r)} is not host:port`);
  return routes;
}

function checkPrefix(prefix: string): string {
  // an agent's id and NATS user: `<prefix><i>`, at most 64 of [A-Za-z0-9_-]
  if (!/^[A-Za-z0-9_-]{1,50}$/.test(prefix)) throw new UsageError(`--agent-prefix ${JSON.stringify(prefix)}: letters, digits, _ and - only (1..50)`);
  return prefix;
}

/** A Kubernetes object or namespace name (DNS-1123 label): nothing else reaches the YAML. */
function dnsLabel(flag: string, v: string): string {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v))
    throw new UsageError(`${flag} ${JSON.stringify(v)}: lower-case letters, digits and - (1..63), starting and ending with a letter or digit`);
  return v;
}

const cluster = (c: string | undefined) => (c === undefined || c === 'default' ? undefined : checkClusterName(c));

export interface K8sSecretsOptions {
  /** agent pods: rank-agent-0 .. rank-agent-<agents-1> */
  agents: number;
  /** the GPU overlay's nodes: <node>-gpu<i> for i < gpusPerNode on each (nodeAgentName) */
  gpuNodes?: string[];
  gpusPerNode?: number;
  tenants: string[];
  /** name of the main Secret (default cmesh-auth) */
  name?: string;
  namespace: string;
  cluster?: string;
  /** values to keep, by key (from the Secrets already applied): only missing keys get fresh ones */
  keep?: Map<string, string>;
  /** the NATS StatefulSet's replicas: routes.conf routes to nats-0 .. nats-<n-1> (default 3) */
  natsReplicas?: number;
}

/**
 * Said when --keep lacks the route password: the new one would keep a NATS server restarted
 * alone (a rolling restart) out of the cluster of the others.
 */
export const ROUTE_PASSWORD_NOT_KEPT =
  `cmesh secrets k8s: --keep has no ${K8S_ROUTE_PASSWORD_KEY} (the Secret ${K8S_SECRETS.nats}): the NATS servers get a new route password; ` +
  'restart them all at once (a server restarted alone cannot rejoin the others), or keep it: kubectl get secret ... cmesh-nats-auth -o json\n';

/** routes.conf of the NATS servers: the route login and a route to every pod of the StatefulSet. */
export function k8sNatsRoutes(replicas: number, password: string): string {
  const hosts = Array.from({ length: replicas }, (_, i) => `${K8S_NATS_STATEFULSET}-${i}.${K8S_NATS_HEADLESS}:${NATS_ROUTE_PORT}`);
  return natsRoutes(hosts, { user: NATS_ROUTE_USER, password });
}

/**
 * The values of the Secrets in `text`, by key: `kubectl get secret ... -o json` output (one
 * Secret or a List of them), `data` base64-decoded, `stringData` as it is.
 */
export function secretValues(text: string, source: string): Map<string, string> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new UsageError(`--keep ${source}: not JSON (give it kubectl get secret ... -o json)`);
  }
  const items = (doc as { kind?: string; items?: unknown[] })?.kind === 'List' ? (doc as { items: unknown[] }).items : [doc];
  const out = new Map<string, string>();
  for (const item of items) {
    const s = item as { kind?: string; data?: Record<string, string>; stringData?: Record<string, string> };
    if (s?.kind !== 'Secret') throw new UsageError(`--keep ${source}: holds a ${JSON.stringify(s?.kind)}, not a Secret`);
    for (const [k, v] of Object.entries(s.data ?? {})) out.set(k, Buffer.from(v, 'base64').toString('utf8'));
    for (const [k, v] of Object.entries(s.stringData ?? {})) out.set(k, v);
  }
  return out;
}

function secretYaml(name: string, namespace: string, component: string, data: [string, string][]): string {
  const body = data.map(([k, v]) => `  ${k}: ${Buffer.from(v, 'utf8').toString('base64')}`).join('\n');
  return `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n  labels:\n    app.kubernetes.io/part-of: cmesh\n    app.kubernetes.io/component: ${component}\ntype: Opaque\ndata:\n${body}\n`;
}

/**
 * The three Secrets of k8s/base as one YAML stream: `cmesh-auth` (api-token and the coordinator's
 * and tenants' `nats-password-<user>`), `cmesh-agent-auth` (`nats-password-rank-agent-<i>`) and
 * `cmesh-nats-auth` (`auth.conf`: natsAuthorization() of these users, the passwords inline, so any
 * number of agents and tenants works without editing the manifests; `routes.conf`: the cluster's
 * route login and routes, and that login's password, `nats-route-password`, for --keep).
 */
export function k8sSecrets(o: K8sSecretsOptions): string {
  const agents = [...agentNames(`${K8S_AGENT_STATEFULSET}-`, o.agents), ...nodeAgentNames(o.gpuNodes ?? [], o.gpusPerNode ?? K8S_GPUS_PER_NODE)];
  if (agents.length === 0) throw new UsageError('no agents: give --agents N (the StatefulSet) or --gpu-nodes (the GPU overlay)');
  const tenants = checkTenants(o.tenants, agents);
  const value = (key: string) => {
    const kept = o.keep?.get(key);
    if (kept === undefined) return randomBytes(32).toString('base64url');
    // names the key, never what is in it
    if (kept.trim().length < MIN_SECRET_LENGTH)
      throw new UsageError(`--keep: ${key} holds ${kept.trim().length} characters; a secret needs at least ${MIN_SECRET_LENGTH}`);
    return kept.trim();
  };
  const passwords = new Map<string, string>();
  const password = (user: string) => {
    if (!passwords.has(user)) passwords.set(user, value(natsPasswordKey(user)));
    return passwords.get(user)!;
  };
  const users = deploymentNatsUsers(agents, tenants, password);
  const conf = natsAuthorization(users, clusterNames(cluster(o.cluster)));
  const routePassword = value(K8S_ROUTE_PASSWORD_KEY);
  const agentSet = new Set(agents);
  const others = users.filter((u) => !agentSet.has(u.user)).map((u): [string, string] => [natsPasswordKey(u.user), password(u.user)]);
  const header = `# cmesh secrets k8s: apply with \`${K8S_SECRETS_APPLY}\` into an existing namespace ${o.namespace}\n# (server-side apply writes no last-applied-configuration copy of these values)\n`;
  return (
    header +
    [
      secretYaml(dnsLabel('--name', o.name ?? K8S_SECRETS.auth), dnsLabel('--namespace', o.namespace), 'auth', [
        [K8S_API_TOKEN_KEY, value(K8S_API_TOKEN_KEY)],
        ...others,
      ]),
      secretYaml(
        K8S_SECRETS.agents,
        o.namespace,
        'agent',
        agents.map((a) => [natsPasswordKey(a), password(a)]),
      ),
      secretYaml(K8S_SECRETS.nats, o.namespace, 'nats', [
        ['auth.conf', conf],
        ['routes.conf', k8sNatsRoutes(o.natsReplicas ?? 3, routePassword)],
        [K8S_ROUTE_PASSWORD_KEY, routePassword],
      ]),
    ].join('---\n')
  );
}

interface InitOpts {
  agents: string;
  natsRoutes?: string;
  agentPrefix: string;
  tenant: string[];
  cluster?: string;
}

interface K8sOpts {
  agents: string;
  natsReplicas: string;
  gpuNodes: string[];
  gpusPerNode: string;
  tenant: string[];
  name: string;
  namespace: string;
  cluster?: string;
  keep?: string;
}

export function register(program: Command): void {
  const cmd = program.command('secrets').description('secrets of a deployment with authentication on (compose, Kubernetes)');
  cmd
    .command('init <dir>')
    .description('make the API token, one NATS password per login and the nats-server configuration in DIR where missing (existing files are kept)')
    .option('--agents <n>', 'agents, one NATS login each: <prefix>0 .. <prefix><n-1>', '2')
    .option('--agent-prefix <prefix>', "agents' names (their ids and NATS users) are this plus their index", 'agent-')
    .option('--tenant <name>', 'a NATS login of its own (client role) for one more tenant, besides client (repeatable)', collect, [])
    .option('--cluster <name>', 'cluster whose subjects the permissions name', 'default')
    .option(
      '--nats-routes <host:port,...>',
      "a NATS cluster's servers (their route ports): also write nats/nats-cluster.conf, a server's configuration in that cluster (SERVER_NAME names it)",
    )
    .action((dir: string, o: InitOpts) => {
      const agents = agentNames(checkPrefix(o.agentPrefix), count('--agents', o.agents));
      const tenants = checkTenants(o.tenant, agents);
      const auth = prepareMeshAuth(dir, agents, cluster(o.cluster), tenants);
      const users = deploymentNatsUsers(agents, tenants, () => '').map((u) => u.user);
      process.stdout.write(`cmesh secrets: ${auth.stateDir}: api-token, nats/<user>.password for ${users.join(', ')}; ${auth.natsConf}\n`);
      if (o.natsRoutes !== undefined)
        process.stdout.write(
          `cmesh secrets: a NATS cluster's server: ${auth.writeClusterConf(routeList(o.natsRoutes))} (its route login's password: nats/${ROUTE_PASSWORD_FILE})\n`,
        );
    });
  cmd
    .command('k8s')
    .description(
      `print the Secrets k8s/base reads (${Object.values(K8S_SECRETS).join(', ')}) with fresh random values: cmesh secrets k8s | ${K8S_SECRETS_APPLY}`,
    )
    .option(
      '--agents <n>',
      `agent pods, one NATS login each: ${K8S_AGENT_STATEFULSET}-0 .. ${K8S_AGENT_STATEFULSET}-<n-1> (the StatefulSet's replicas or more; 0 with --gpu-nodes)`,
      '2',
    )
    .option('--gpu-nodes <nodes>', `the GPU overlay's nodes (comma-separated, repeatable): one NATS login per device, <node>-gpu<i>`, collect, [])
    .option('--gpus-per-node <n>', "GPUs (agents) per GPU node: the GPU overlay's CMESH_DEVICES", String(K8S_GPUS_PER_NODE))
    .option('--tenant <name>', 'a NATS login of its own (client role) for one more tenant, besides client (repeatable)', collect, [])
    .option('--name <name>', "name of the Secret with the API token and the coordinator's and tenants' passwords", K8S_SECRETS.auth)
    .option('--namespace <ns>', 'namespace', 'cmesh')
    .option('--cluster <name>', 'cluster whose subjects the permissions name', 'default')
    .option('--nats-replicas <n>', `the NATS StatefulSet's replicas: routes.conf routes to ${K8S_NATS_STATEFULSET}-0 .. ${K8S_NATS_STATEFULSET}-<n-1>`, '3')
    .option('--keep <file>', 'keep the values of these Secrets (kubectl get secret ... -o json; - for stdin); only missing keys get fresh ones')
    .action((o: K8sOpts, command: Command) => {
      const keep = o.keep === undefined ? undefined : secretValues(readFileSync(o.keep === '-' ? 0 : o.keep, 'utf8'), o.keep);
      if (keep && !keep.has(K8S_ROUTE_PASSWORD_KEY)) process.stderr.write(ROUTE_PASSWORD_NOT_KEPT);
      const nodes = gpuNodes(o.gpuNodes);
      // the GPU overlay has no StatefulSet: its agents are the nodes' unless --agents says more
      const agents = nodes.length > 0 && command.getOptionValueSource('agents') === 'default' ? 0 : count('--agents', o.agents, 0);
      process.stdout.write(
        k8sSecrets({
          agents,
          gpuNodes: nodes,
          gpusPerNode: count('--gpus-per-node', o.gpusPerNode),
          tenants: o.tenant,
          name: o.name,
          namespace: o.namespace,
          cluster: o.cluster,
          keep,
          natsReplicas: count('--nats-replicas', o.natsReplicas),
        }),
      );
    });
}

// Who may publish and subscribe where on a cluster's NATS server: one permission set per login,
// from the cluster's names (cluster.ts), and the nats-server `authorization` block that gives each
// user its role. `cmesh up`, compose and k8s all render their server configuration from here.
// docs/operations.md ("Threat model") says what each login can and cannot do.
//
// - coordinator: the cluster's subjects and all of JetStream (it owns the state, jobs, claims,
//   replica and scan buckets, and creates and deletes every store bucket).
// - agent (one login per agent, named as the agent): its own register/heartbeat/deregister and
//   job-event subjects (the coordinator takes the agent's identity from them), its own
//   notifications and job assignments, job cancels, trace requests, service groups' subjects.
// - client (one login per tenant: the CLI, `cmesh run --rdzv-backend nats`, programs with a
//   nats:// init method, service members): the client API, job updates, service placements and
//   group subjects, trace requests.
//
// Agents and clients get no JetStream verb that makes, changes or lists streams (so no
// `republish`, `sources` or `mirror` of theirs can copy or inject messages, and no stream can
// capture a subject), only what a KV client needs on a store bucket it was told the name of, and
// nothing at all on the coordinator's buckets. Replies reach each login under its own inbox
// prefix (`_INBOX.<user>`), the only inboxes it may read.
import { natsInboxPrefix } from '@cmesh/collectives/nats-login';
import { ClusterNames } from './cluster';

export const NATS_ROLES = ['coordinator', 'agent', 'client'] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

export interface NatsUser {
  /** the login; an agent's is its agent id (the subjects it may publish on carry it) */
  user: string;
  /** the password, or `{ env: NAME }`: nats-server reads it from its environment variable NAME */
  password: string | { env: string };
  role: NatsRole;
}

export interface NatsPermissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[]; deny?: string[] };
  /** may answer requests sent to it (trace collection) */
  allow_responses?: boolean;
}

/** The cluster's prefix: `cmesh` or `cmesh.<cluster>` (see clusterNames). */
const prefixOf = (n: ClusterNames) => n.agents.list.slice(0, -'.agents.list'.length);

const inboxOf = (user: string) => `${natsInboxPrefix(user)}.>`;

/**
 * What a KV client does on a bucket it knows the name of: bind (STREAM.INFO), get (DIRECT.GET,
 * STREAM.MSG.GET), put/create/update/delete keys ($KV.<bucket>.<key>), watch and list keys (an
 * ordered consumer: CONSUMER.CREATE/INFO/DELETE, flow control). A bucket name is one subject
 * token, so these cover every bucket; the coordinator's are denied by name (coordinatorBuckets),
 * a store bucket is reached only by whoever knows its unguessable name.
 */
const STORE_CLIENT = [
  '$JS.API.INFO',
  '$JS.API.STREAM.INFO.*',
  '$JS.API.DIRECT.GET.*',
  '$JS.API.DIRECT.GET.*.>',
  '$JS.API.STREAM.MSG.GET.*',
  '$JS.API.CONSUMER.CREATE.*',
  '$JS.API.CONSUMER.CREATE.*.>',
  '$JS.API.CONSUMER.INFO.*.*',
  '$JS.API.CONSUMER.DELETE.*.*',
  '$KV.*.>',
  '$JS.ACK.>',
  '$JS.FC.>',
];

/** Every verb on the coordinator's buckets: read, watch and write as well as change the stream. */
function coordinatorBuckets(n: ClusterNames): string[] {
  return Object.values(n.buckets).flatMap((b) => {
    const stream = `KV_${b}`;
    return [
      `$KV.${b}.>`,
      `$JS.API.STREAM.INFO.${stream}`,
      `$JS.API.DIRECT.GET.${stream}`,
      `$JS.API.DIRECT.GET.${stream}.>`,
      `$JS.API.STREAM.MSG.GET.${stream}`,
      `$JS.API.CONSUMER.CREATE.${stream}`,
      `$JS.API.CONSUMER.CREATE.${stream}.>`,
      `$JS.API.CONSUMER.INFO.${stream}.*`,
      `$JS.API.CONSUMER.DELETE.${stream}.*`,
    ];
  });
}

export function natsPermissions(role: NatsRole, n: ClusterNames, user: string): NatsPermissions {
  const s = prefixOf(n);
  switch (role) {
    case 'coordinator':
      // $SYS.REQ.ACCOUNT.PING.STATZ: every server of the cluster answers it, so the coordinator counts them (natsClusterSize)
      return {
        publish: { allow: [`${s}.>`, '$JS.API.>', '$KV.>', '$JS.ACK.>', '$JS.FC.>', '_INBOX.>', '$SYS.REQ.ACCOUNT.PING.STATZ'] },
        subscribe: { allow: [`${s}.>`, inboxOf(user)] },
      };
    case 'agent': {
      const id = user;
      return {
        // svc.g.>: its service workers take members' ops and send results, heartbeats, ends, and
        // answer the coordinator's status requests (allow_responses); the group's MAC, not the
        // subject, says who may act in a group
        publish: {
          allow: [
            n.agents.register(id),
            n.agents.heartbeat(id),
            n.agents.deregister(id),
            n.jobs.events('*', id),
            n.serviceGroups.groupWildcard,
            n.stores.open,
            ...STORE_CLIENT,
          ],
          deny: coordinatorBuckets(n),
        },
        subscribe: { allow: [n.agents.events(id), n.jobs.start(id), n.jobs.cancel, n.trace.collect, n.serviceGroups.groupWildcard, inboxOf(user)] },
        allow_responses: true,
      };
    }
    case 'client':
      return {
        publish: {
          allow: [
            n.agents.list,
            n.groups.create,
            n.groups.get,
            n.groups.list,
            n.rdzv.join,
            n.rdzv.get,
            n.rdzv.leave,
            n.jobs.submit,
            n.jobs.get,
            n.jobs.list,
            n.scans.run,
            n.scans.get,
            n.scans.list,
            n.serviceGroups.join,
            n.serviceGroups.leave,
            n.serviceGroups.groupWildcard,
            n.stores.open,
            ...STORE_CLIENT,
          ],
          deny: coordinatorBuckets(n),
        },
        // service members: their placements, and their groups' results, heartbeats and ends
        subscribe: { allow: [n.jobs.updates('*'), n.trace.collect, n.serviceGroups.placedWildcard, n.serviceGroups.groupWildcard, inboxOf(user)] },
        allow_responses: true,
      };
  }
}

/**
 * nats-server's `authorization` block for these users (nats-server.conf accepts JSON). Anonymous
 * clients are refused: every connection must log in as one of them.
 */
export function natsAuthorization(users: NatsUser[], n: ClusterNames): string {
  const seen = new Set<string>();
  for (const u of users) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(u.user)) throw new Error(`NATS user name ${JSON.stringify(u.user)}: letters, digits, _ and - only`);
    if (seen.has(u.user)) throw new Error(`NATS user ${u.user} is listed twice`);
    seen.add(u.user);
  }
  const fromEnv = (name: string) => `\u0000${name}\u0000`;
  const block = {
    users: users.map((u) => ({
      user: u.user,
      password: typeof u.password === 'string' ? u.password : fromEnv(u.password.env),
      permissions: natsPermissions(u.role, n, u.user),
    })),
  };
  for (const u of users) {
    if (typeof u.password !== 'string' && !/^[A-Z][A-Z0-9_]*$/.test(u.password.env))
      throw new Error(`NATS password variable ${u.password.env}: capitals, digits and _ only`);
  }
  // an unquoted $NAME is a variable nats-server resolves from its environment
  return `authorization: ${JSON.stringify(block, null, 2).replace(/"\\u0000([A-Z0-9_]+)\\u0000"/g, '$$$1')}\n`;
}

/** The login of the CLI and of programs that name none: the first tenant of every deployment. */
export const DEFAULT_CLIENT_USER = 'client';

/**
 * The NATS users of a deployment: the coordinator, one login per agent (named as the agent: in
 * k8s the StatefulSet's pod names, in compose the services' agent names) and one per tenant
 * (client role; `client` first). `password(user)` gives each its password or variable.
 */
export function deploymentNatsUsers(agents: string[], tenants: string[], password: (user: string) => NatsUser['password']): NatsUser[] {
  const clients = [DEFAULT_CLIENT_USER, ...tenants.filter((t) => t !== DEFAULT_CLIENT_USER)];
  return [
    { user: 'coordinator', role: 'coordinator', password: password('coordinator') },
    ...agents.map((user) => ({ user, role: 'agent' as const, password: password(user) })),
    ...clients.map((user) => ({ user, role: 'client' as const, password: password(user) })),
  ];
}

// Who may publish and subscribe where on a cluster's NATS server: one permission set per role, from
// the cluster's names (cluster.ts), and the nats-server `authorization` block that gives each user
// its role. `cmesh up`, compose and k8s all render their server configuration from here.
//
// - coordinator: the cluster's subjects and JetStream (it owns the state, jobs, claims and
//   replica buckets).
// - agent: its requests to the coordinator (register, heartbeat, deregister), its own events
//   subject, the job broadcasts it serves (start, cancel), the job events it sends, trace replies,
//   and JetStream for the jobs' store buckets, but no write to the coordinator's buckets.
// - client (the CLI, `cmesh run --rdzv-backend nats`, programs with a nats:// init method, service
//   members): the client API (agents.list, groups.*, rdzv.*, jobs.submit/get/list, scans.*,
//   svc.join/leave), job updates, service placements and group subjects (svc.g.>), trace replies,
//   and JetStream for its own store buckets, with the same deny list as an agent.
//
// Limits of subject permissions: a bucket name is one subject token, so an agent or client may
// reach every store bucket (`cmesh_store_*`) but none of the coordinator's; replies travel on
// `_INBOX.>`, which every role subscribes.
import { ClusterNames } from './cluster';

export const NATS_ROLES = ['coordinator', 'agent', 'client'] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

export interface NatsUser {
  user: string;
  /** the password, or `{ env: NAME }`: nats-server reads it from its environment variable NAME (a Kubernetes Secret) */
  password: string | { env: string };
  role: NatsRole;
  /**
   * agent: the agent id whose events subject it may read (default: the user name); `*` for a
   * login that agents share (compose, k8s: agents are named at run time), which may read every
   * agent's events but is otherwise an agent.
   */
  agentId?: string;
}

export interface NatsPermissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[]; deny?: string[] };
  /** may answer requests sent to it (trace collection) */
  allow_responses?: boolean;
}

/** The cluster's prefix: `cmesh` or `cmesh.<cluster>` (see clusterNames). */
const prefixOf = (n: ClusterNames) => n.agents.register.slice(0, -'.agents.register'.length);

const JETSTREAM = ['$JS.API.>', '$KV.>', '$JS.ACK.>', '$JS.FC.>'];

/** What nobody but the coordinator may do to its buckets: write keys, or create, change, purge or delete the stream. */
function coordinatorBuckets(n: ClusterNames): string[] {
  return Object.values(n.buckets).flatMap((b) => [
    `$KV.${b}.>`,
    ...['CREATE', 'UPDATE', 'DELETE', 'PURGE', 'MSG.DELETE'].map((verb) => `$JS.API.STREAM.${verb}.KV_${b}`),
  ]);
}

export function natsPermissions(role: NatsRole, n: ClusterNames, agentId?: string): NatsPermissions {
  const s = prefixOf(n);
  switch (role) {
    case 'coordinator':
      return { publish: { allow: [`${s}.>`, ...JETSTREAM, '_INBOX.>'] }, subscribe: { allow: [`${s}.>`, '_INBOX.>'] } };
    case 'agent':
      if (!agentId) throw new Error('an agent user needs its agent id');
      return {
        // svc.g.>: its service workers take members' ops and send results, heartbeats, ends, and
        // answer the coordinator's status requests (allow_responses)
        publish: { allow: [n.agents.register, n.agents.heartbeat, n.agents.deregister, n.jobs.eventsWildcard, n.svc.groupWildcard, ...JETSTREAM], deny: coordinatorBuckets(n) },
        subscribe: { allow: [n.agents.events(agentId), n.jobs.start, n.jobs.cancel, n.trace.collect, n.svc.groupWildcard, '_INBOX.>'] },
        allow_responses: true,
      };
    case 'client':
      return {
        publish: {
          allow: [n.agents.list, n.groups.create, n.groups.get, n.groups.list, n.rdzv.join, n.rdzv.get, n.rdzv.leave, n.jobs.submit, n.jobs.get, n.jobs.list, n.scans.run, n.scans.get, n.scans.list, n.svc.join, n.svc.leave, n.svc.groupWildcard, ...JETSTREAM],
          deny: coordinatorBuckets(n),
        },
        // service members: their placements, and their groups' results, heartbeats and ends
        subscribe: { allow: [n.jobs.updates('*'), n.trace.collect, n.svc.placedWildcard, n.svc.groupWildcard, '_INBOX.>'] },
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
      permissions: natsPermissions(u.role, n, u.agentId ?? u.user),
    })),
  };
  for (const u of users) {
    if (typeof u.password !== 'string' && !/^[A-Z][A-Z0-9_]*$/.test(u.password.env)) throw new Error(`NATS password variable ${u.password.env}: capitals, digits and _ only`);
  }
  // an unquoted $NAME is a variable nats-server resolves from its environment
  return `authorization: ${JSON.stringify(block, null, 2).replace(/"\\u0000([A-Z0-9_]+)\\u0000"/g, '$$$1')}\n`;
}

/**
 * The NATS users of compose and k8s: the coordinator, one login the agents share (they are
 * named at run time), and clients; in k8s nats-server reads each password from the variable named
 * here, which the Secret `cmesh-auth` fills.
 */
export const DEPLOYMENT_NATS_USERS: NatsUser[] = [
  { user: 'coordinator', role: 'coordinator', password: { env: 'NATS_COORDINATOR_PASSWORD' } },
  { user: 'agent', role: 'agent', agentId: '*', password: { env: 'NATS_AGENT_PASSWORD' } },
  { user: 'client', role: 'client', password: { env: 'NATS_CLIENT_PASSWORD' } },
];

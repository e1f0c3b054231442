// A process's way into a mesh's collectives service: one NATS connection, `join` a named group
// (the coordinator places every member on an agent once `size` members joined), then collectives
// on the returned group. The join sends a key of this member's; the placement carries the group's
// secret sealed under it, which no other client can open.
import { randomUUID } from 'crypto';
import { connect } from '@nats-io/transport-node';
import { ConnectionOptions, NatsConnection, RequestError, TimeoutError } from '@nats-io/nats-core';
import {
  ClusterNames,
  ErrorReplySchema,
  SvcBackendRequest,
  SvcJoin,
  SvcJoinReplySchema,
  SvcJoinSchema,
  SvcPlaced,
  SvcPlacedSchema,
  clusterNames,
  decodeMessage,
  newSvcKey,
  openSvcSecret,
} from '@cmesh/protocol';
import { CmeshError, DistTimeoutError, InvalidArgumentError } from '@cmesh/collectives/errors';
import { hostIdentity } from '@cmesh/collectives/host-identity';
import { natsInboxPrefix, natsLogin } from '@cmesh/collectives/nats-login';
import { ServiceGroup } from './service-group';

export interface ConnectMeshOptions {
  /** the mesh's NATS server(s), e.g. nats://127.0.0.1:4222 */
  servers: string | string[];
  /** the mesh's cluster (CMESH_CLUSTER; default: the default cluster) */
  cluster?: string;
  /** NATS login (the mesh's client user); default: NATS_USER, NATS_PASSWORD[_FILE], NATS_TLS_CA_FILE */
  user?: string;
  pass?: string;
  /** any other option of the nats client */
  nats?: Partial<ConnectionOptions>;
  /**
   * A member on its agent's host sends its data through a Unix socket and shared memory instead of
   * NATS when the agent offers it (default true; false: always NATS)
   */
  local?: boolean;
  /** the largest op's data or result a group of this connection sends or takes (default 1 GiB) */
  maxBytes?: number;
  /** where its groups report messages they dropped (not the group's, malformed), at most once per kind and interval (default console.warn) */
  warn?: (line: string) => void;
}

export interface JoinOptions {
  /** the group's world size: join returns when this many members joined and were placed */
  size?: number;
  /** or an elastic group: placed when `max` joined, or `lastCallMs` (default 30 s) after `min` joined, with the members it then has */
  min?: number;
  max?: number;
  lastCallMs?: number;
  /** how this member is named in errors and records (default: its random member id) */
  label?: string;
  /** how long to wait for the others and the agents (ms, default 60 s) */
  timeoutMs?: number;
  /**
   * The library backend the group runs on: 'auto' (default) nccl when enough idle agents have a
   * working nccl backend (their GPUs), else tcp; 'nccl' only on such agents (waits for them while
   * busy, refused when the mesh has too few); 'tcp' on any agents. g.backend says which it got.
   */
  backend?: SvcBackendRequest;
}

/** A refusal by the coordinator (its error reply's code and message). */
export class ServiceRequestError extends CmeshError {
  constructor(
    override readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class MeshConnection {
  private readonly groups = new Set<ServiceGroup>();

  constructor(
    readonly nc: NatsConnection,
    readonly names: ClusterNames,
    private readonly local = true,
    private readonly maxBytes?: number,
    private readonly warn?: (line: string) => void,
  ) {}

  /** Joins group `name` of `size` (or `min` to `max`) members; resolves with this member's rank and the world size once the group is placed and its agents are ready. */
  async join(name: string, opts: JoinOptions): Promise<ServiceGroup> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const member = randomUUID();
    // only the coordinator reads svc.join: the group's secret comes back sealed under this key
    const key = newSvcKey();
    const { size, min, max, lastCallMs, label, backend } = opts ?? {};
    const body = { name, member, size, min, max, lastCallMs, label, hostId: hostIdentity(), backend, key: key.toString('base64') } as SvcJoin;
    const shape = SvcJoinSchema.safeParse(body);
    if (!shape.success) throw new InvalidArgumentError(`join ${JSON.stringify(name)}: ${shape.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ')}`);
    const deadline = Date.now() + timeoutMs;
    // subscribed before joining: the round may be placed by the next member's join at once
    const placedSub = this.nc.subscribe(this.names.svc.placed(name));
    try {
      const reply = await this.nc.request(this.names.svc.join, JSON.stringify(shape.data), { timeout: Math.min(timeoutMs, 10_000) }).catch((e: Error) => {
        // the coordinator (or NATS) away: typed, as every refusal of the library is
        if (e instanceof TimeoutError) throw new DistTimeoutError(`join ${JSON.stringify(name)}: no coordinator answered within ${Math.min(timeoutMs, 10_000)} ms`);
        if (e instanceof RequestError && e.isNoResponders()) throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: no coordinator is listening (503)`);
        throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: ${e.message}`);
      });
      const refused = decodeMessage(ErrorReplySchema, reply.data);
      if (refused.ok) {
        const { code, message } = refused.value.error;
        throw code === 'BAD_REQUEST' ? new InvalidArgumentError(`join ${JSON.stringify(name)}: ${message}`) : new ServiceRequestError(code, `join ${JSON.stringify(name)}: ${message}`);
      }
      const ok = decodeMessage(SvcJoinReplySchema, reply.data);
      if (!ok.ok) throw new ServiceRequestError('INTERNAL', `join ${JSON.stringify(name)}: malformed reply (${ok.message})`);
      const { placed, rank, secret } = await this.waitPlaced(placedSub, member, key, deadline, name);
      const { sealed: _, ...shown } = placed;
      const group = new ServiceGroup(this.nc, this.names, shown, rank, secret, { local: this.local, maxBytes: this.maxBytes, warn: this.warn });
      this.groups.add(group);
      try {
        await group.start(Math.max(1, deadline - Date.now()));
      } catch (e) {
        this.groups.delete(group);
        group.close();
        throw e;
      }
      return group;
    } finally {
      placedSub.unsubscribe();
    }
  }

  /** The placement that names this member with the group's secret sealed under its key (any other is not the coordinator's). */
  private async waitPlaced(sub: ReturnType<NatsConnection['subscribe']>, member: string, key: Buffer, deadline: number, name: string): Promise<{ placed: SvcPlaced; rank: number; secret: Buffer }> {
    const timer = setTimeout(() => sub.unsubscribe(), Math.max(1, deadline - Date.now()));
    try {
      for await (const m of sub) {
        const d = decodeMessage(SvcPlacedSchema, m.data);
        if (!d.ok) continue;
        const p = d.value;
        if (p.error && p.members.length === 0) {
          if (p.joined?.includes(member)) throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: ${p.error}`);
          continue;
        }
        const rank = p.members.findIndex((x) => x.member === member);
        const sealed = p.sealed?.[rank];
        const secret = rank >= 0 && sealed ? openSvcSecret(key, sealed, p.groupId, rank) : null;
        if (secret && p.members[rank].rank === rank && p.size === p.members.length) return { placed: p, rank, secret };
      }
    } finally {
      clearTimeout(timer);
    }
    await this.nc.request(this.names.svc.leave, JSON.stringify({ name, member }), { timeout: 5000 }).catch(() => undefined);
    throw new DistTimeoutError(`join ${JSON.stringify(name)}: the group was not complete and placed in time`);
  }

  /** Leaves every group and closes the connection. */
  async close(): Promise<void> {
    for (const g of this.groups) await g.leave().catch(() => undefined);
    this.groups.clear();
    await this.nc.drain().catch(() => undefined);
  }
}

/** Connects to a mesh's NATS server. */
export async function connectMesh(opts: ConnectMeshOptions): Promise<MeshConnection> {
  const login = opts.user ? { user: opts.user, pass: opts.pass, inboxPrefix: natsInboxPrefix(opts.user) } : natsLogin();
  const nc = await connect({ servers: opts.servers, name: 'cmesh-client', ...login, ...opts.nats });
  return new MeshConnection(nc, clusterNames(opts.cluster), opts.local ?? true, opts.maxBytes, opts.warn);
}

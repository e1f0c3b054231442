// A process's way into a mesh's collectives service: one NATS connection, `join` a named group
// (the coordinator places every member on an agent once `size` members joined), then collectives
// on the returned group. The join sends a key of this member's; the placement carries the group's
// secret sealed under it, which no other client can open.
import { randomUUID } from 'crypto';
import { connect } from '@nats-io/transport-node';
import { ConnectionOptions, Msg, NatsConnection, RequestError, TimeoutError } from '@nats-io/nats-core';
import {
  ClusterNames,
  ErrorReplySchema,
  ServiceGroupBackendRequest,
  ServiceGroupJoin,
  ServiceGroupJoinReplySchema,
  ServiceGroupJoinSchema,
  ServiceGroupPlaced,
  ServiceGroupPlacedSchema,
  clusterNames,
  decodeMessage,
  newServiceGroupKey,
  openServiceGroupSecret,
} from '@cmesh/protocol';
import { CmeshError, DistTimeoutError, InvalidArgumentError } from '@cmesh/collectives/errors';
import { hostIdentity } from '@cmesh/collectives/host-identity';
import { NATS_RECONNECT, natsInboxPrefix, natsLogin, natsServers, watchConnection } from '@cmesh/collectives/nats-login';
import { ServiceGroup, timeoutOf } from './service-group';
import { setTimeout as sleep } from 'timers/promises';

/** How long close() lets the connection drain before closing it (NATS may be down). */
const CLOSE_DRAIN_MS = 5_000;
/** A join is sent again only while this much of its deadline is left (the last attempt gets an answer's time). */
const JOIN_RETRY_MIN_MS = 1000;

export interface ConnectMeshOptions {
  /** the mesh's NATS server(s), e.g. nats://127.0.0.1:4222; a cluster's as a list or comma-separated */
  servers: string | string[];
  /** the mesh's cluster (CMESH_CLUSTER; default: the default cluster) */
  cluster?: string;
  /** NATS login (the mesh's client user); default: NATS_USER, NATS_PASSWORD[_FILE], NATS_TLS_CA_FILE */
  user?: string;
  pass?: string;
  /**
   * any other option of the nats client. By default it reconnects for as long as it lives (each
   * operation's own deadline bounds the wait; one that passes while NATS is unreachable fails with
   * NatsConnectionLostError)
   */
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
  /** how long to wait for the others and the agents (ms, default 60 s); `timeout` as in the library's options */
  timeout?: number;
  /** @deprecated `timeout`'s earlier name, still taken */
  timeoutMs?: number;
  /**
   * The library backend the group runs on: 'auto' (default) nccl when enough idle agents have a
   * working nccl backend (their GPUs), else tcp; 'nccl' only on such agents (waits for them while
   * busy, refused when the mesh has too few); 'tcp' on any agents. g.backend says which it got.
   */
  backend?: ServiceGroupBackendRequest;
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
    const timeoutMs = timeoutOf(opts) ?? 60_000;
    const member = randomUUID();
    // only the coordinator reads svc.join: the group's secret comes back sealed under this key
    const key = newServiceGroupKey();
    const { size, min, max, lastCallMs, label, backend } = opts ?? {};
    const body = {
      name,
      member,
      size,
      min,
      max,
      lastCallMs,
      label,
      hostId: hostIdentity(),
      backend,
      key: key.toString('base64'),
      idempotencyKey: randomUUID(),
    } as ServiceGroupJoin;
    const shape = ServiceGroupJoinSchema.safeParse(body);
    if (!shape.success)
      throw new InvalidArgumentError(
        `join ${JSON.stringify(name)}: ${shape.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ')}`,
      );
    const deadline = Date.now() + timeoutMs;
    // subscribed before joining: the round may be placed by the next member's join at once
    const placedSub = this.nc.subscribe(this.names.serviceGroups.placed(name));
    try {
      const reply = await this.requestJoin(shape.data, name, deadline).catch((e: Error) => {
        // the coordinator (or NATS) away: typed, as every refusal of the library is
        const down = watchConnection(this.nc).lost(`join ${JSON.stringify(name)}: no answer within ${timeoutMs} ms`);
        if (down) throw down;
        if (e instanceof TimeoutError) throw new DistTimeoutError(`join ${JSON.stringify(name)}: no coordinator answered within ${timeoutMs} ms`);
        if (e instanceof RequestError && e.isNoResponders())
          throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: no coordinator is listening (503)`);
        throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: ${e.message}`);
      });
      const refused = decodeMessage(ErrorReplySchema, reply.data);
      if (refused.ok) {
        const { code, message } = refused.value.error;
        throw code === 'BAD_REQUEST'
          ? new InvalidArgumentError(`join ${JSON.stringify(name)}: ${message}`)
          : new ServiceRequestError(code, `join ${JSON.stringify(name)}: ${message}`);
      }
      const ok = decodeMessage(ServiceGroupJoinReplySchema, reply.data);
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
        // every failure typed: what is not the library's own is NATS's (a server restarting)
        if (e instanceof CmeshError) throw e;
        throw (
          watchConnection(this.nc).lost(`join ${JSON.stringify(name)}: ${(e as Error).message}`) ??
          new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: ${(e as Error).message}`)
        );
      }
      return group;
    } finally {
      placedSub.unsubscribe();
    }
  }

  /**
   * svc.join, sent again with the same body (member, key, idempotency key) while no answer came or
   * the answer says try again (UNAVAILABLE), until the deadline: the coordinator answers a retry
   * with the first attempt's membership, so the member joins once however many attempts reach it.
   */
  private async requestJoin(body: ServiceGroupJoin, name: string, deadline: number): Promise<Msg> {
    for (let attempt = 0; ; attempt++) {
      const left = deadline - Date.now();
      let reply: Msg;
      try {
        reply = await this.nc.request(this.names.serviceGroups.join, JSON.stringify(body), { timeout: Math.max(1, Math.min(left, 10_000)) });
      } catch (e) {
        if (deadline - Date.now() < JOIN_RETRY_MIN_MS) throw e;
        await sleep(Math.min(250 * 2 ** attempt, 2000));
        continue;
      }
      const refused = decodeMessage(ErrorReplySchema, reply.data);
      if (!refused.ok || refused.value.error.code !== 'UNAVAILABLE' || deadline - Date.now() < JOIN_RETRY_MIN_MS) return reply;
      await sleep(Math.min(250 * 2 ** attempt, 2000));
    }
  }

  /** The placement that names this member with the group's secret sealed under its key (any other is not the coordinator's). */
  private async waitPlaced(
    sub: ReturnType<NatsConnection['subscribe']>,
    member: string,
    key: Buffer,
    deadline: number,
    name: string,
  ): Promise<{ placed: ServiceGroupPlaced; rank: number; secret: Buffer }> {
    const timer = setTimeout(() => sub.unsubscribe(), Math.max(1, deadline - Date.now()));
    try {
      for await (const m of sub) {
        const d = decodeMessage(ServiceGroupPlacedSchema, m.data);
        if (!d.ok) continue;
        const p = d.value;
        if (p.error && p.members.length === 0) {
          if (p.joined?.includes(member)) throw new ServiceRequestError('UNAVAILABLE', `join ${JSON.stringify(name)}: ${p.error}`);
          continue;
        }
        const rank = p.members.findIndex((x) => x.member === member);
        const sealed = p.sealed?.[rank];
        const secret = rank >= 0 && sealed ? openServiceGroupSecret(key, sealed, p.groupId, rank) : null;
        if (secret && p.members[rank].rank === rank && p.size === p.members.length) return { placed: p, rank, secret };
      }
    } finally {
      clearTimeout(timer);
    }
    const leave = this.nc.request(this.names.serviceGroups.leave, JSON.stringify({ name, member }), { timeout: 5000 }).catch(() => undefined);
    // NATS down: the leave goes out once it is back; the caller hears of the outage at its deadline
    const down = watchConnection(this.nc).lost(`join ${JSON.stringify(name)}: the group was not complete and placed in time`);
    if (down) throw down;
    await leave;
    throw new DistTimeoutError(`join ${JSON.stringify(name)}: the group was not complete and placed in time`);
  }

  /** Leaves every group and closes the connection. */
  async close(): Promise<void> {
    for (const g of this.groups) await g.leave().catch(() => undefined);
    this.groups.clear();
    // a drain waits for the server: NATS down, the connection is closed after CLOSE_DRAIN_MS instead
    await Promise.race([this.nc.drain().catch(() => undefined), new Promise((r) => setTimeout(r, CLOSE_DRAIN_MS).unref())]);
    if (!this.nc.isClosed()) await this.nc.close().catch(() => undefined);
  }
}

/** Connects to a mesh's NATS server. */
export async function connectMesh(opts: ConnectMeshOptions): Promise<MeshConnection> {
  const login = opts.user ? { user: opts.user, pass: opts.pass, inboxPrefix: natsInboxPrefix(opts.user) } : natsLogin();
  const nc = await connect({ servers: natsServers(opts.servers), name: 'cmesh-client', ...NATS_RECONNECT, ...login, ...opts.nats });
  watchConnection(nc);
  return new MeshConnection(nc, clusterNames(opts.cluster), opts.local ?? true, opts.maxBytes, opts.warn);
}

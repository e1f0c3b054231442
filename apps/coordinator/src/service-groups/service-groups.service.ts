// Collectives as a service, the coordinator's part: rounds of named groups in the state bucket
// (compare-and-set, so replicas agree), the placement of a full round on idle agents (one member
// per agent; a full round waits, queued, while too few are idle), and the end of a group (its
// agents' store bucket deleted, its agents free again), also of a group whose end event was
// missed (no agent serves it any more, by their heartbeats). Each placed round gets a secret G
// (service-groups-auth.ts in @cmesh/protocol): sealed per member in the placement, in the clear to each
// member's agent on its own events subject, and kept here (the state bucket is the coordinator's
// alone) to check and sign the group's ends.
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Msg, NatsConnection, Subscription, headers } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { jobBucket, randomStoreId } from '@cmesh/collectives/nats';
import {
  AgentNotification,
  ClusterNames,
  KV_KEYS,
  SERVICE_GROUP_LAST_CALL_MS,
  SERVICE_GROUP_MAC_HEADER,
  ServiceGroupEnd,
  ServiceGroupEndSchema,
  ServiceGroupJoin,
  ServiceGroupJoinReply,
  ServiceGroupJoinReplySchema,
  ServiceGroupLeave,
  ServiceGroupNameSchema,
  ServiceGroupPlaced,
  ServiceGroupRound,
  newServiceGroupKey,
  requestFingerprint,
  sealServiceGroupSecret,
  serviceGroupKeys,
  serviceGroupKeyFrom,
  serviceGroupMac,
  serviceGroupMacValid,
} from '@cmesh/protocol';
import { RateLimitedLog } from '@cmesh/protocol/kit';
import { InboundMessages } from '../nats/inbound-messages';
import { AgentsService } from '../agents/agents.service';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ReplyError } from '../nats/reply-error';
import { AgentClaims } from '../jobs/agent-claims';
import { KvMirror } from '../state/kv-mirror';
import { chooseBackend, ncclWhyNot } from './choose-backend';
import { matchHosts } from './match-hosts';
import { missedPlacements } from './missed-placements';
import { KvState } from '../state/kv-state';
import { IdempotencyKeys, KeyEntry } from '../idempotency/idempotency-keys';
import { checkKeyOwner } from '../idempotency/principal';
import { randomBytes } from 'crypto';

/** A placed group is looked at for abandonment every this many seconds, once placed this long (ms). */
const ABANDONED_CHECK_TICKS = 5;
const ABANDONED_AFTER_MS = 10_000;
/** A keyed join that left neither an answer nor its member in the round this long ago failed (its replica died): a retry joins anew. */
const JOIN_STUCK_MS = 10_000;

/** `<name>_<round>`: the token of a group's subjects (names have no `_`, so ids never meet). */
const serviceGroupId = (name: string, round: number) => `${name}_${round}`;

@Injectable()
export class ServiceGroupsService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger('ServiceGroups');
  /** groups whose round closes later (an elastic round's last call) or waits for idle agents (queued): looked at again when a group ends, and every second */
  private readonly pending = new Set<string>();
  private retry?: NodeJS.Timeout;
  private ticks = 0;
  /** every round, in memory (a KV watch) */
  private readonly rounds: KvMirror<ServiceGroupRound>;
  /** the jobs' agent claims, read only: an agent a job holds is not idle */
  private readonly claims: AgentClaims;
  /** joins' idempotency keys, shared with the other replicas */
  private readonly keys: IdempotencyKeys;

  /** the groups' end events (svc.g.*.end), each checked against its group's secret */
  private endSub?: Subscription;
  private readonly dropLog = new RateLimitedLog((l) => this.log.warn(l), 10_000);
  /** placements sent again to an agent that missed them, by `<groupId>/<rank>` (missed-placements.ts) */
  private readonly resent = new Map<string, number>();

  constructor(
    private readonly state: KvState,
    private readonly agents: AgentsService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
    private readonly inbound: InboundMessages,
  ) {
    this.rounds = new KvMirror<ServiceGroupRound>(state, KV_KEYS.serviceGroupsPrefix);
    this.claims = new AgentClaims(nc, names.buckets.claims, 'service-groups');
    this.keys = new IdempotencyKeys(nc, names.buckets.idempotency, `service-groups/${randomBytes(4).toString('hex')}`);
  }

  /** Compare-and-set of a group's round; this replica's mirror sees the write at once. */
  private async update(name: string, fn: (cur: ServiceGroupRound | undefined) => ServiceGroupRound | undefined): Promise<ServiceGroupRound | undefined> {
    const rec = await this.state.update<ServiceGroupRound>(KV_KEYS.serviceGroup(name), fn);
    if (rec) this.rounds.set(name, rec);
    return rec;
  }

  /**
   * A join; with an idempotency key (scoped to `principal`, see principal.ts) a retry gets the
   * first join's answer and the same membership, never a second one.
   */
  async join(body: ServiceGroupJoin, principal = 'nats'): Promise<ServiceGroupJoinReply> {
    const { idempotencyKey: key, ...req } = body;
    if (!key) return this.joinOnce(req);
    const what = `join ${JSON.stringify(req.name)}`;
    checkKeyOwner(principal, what);
    const slot = IdempotencyKeys.slot('join', principal, key);
    const b = await this.keys.begin(slot, requestFingerprint(req), req.member, what);
    if (b.kind === 'first') return this.joinFirst(slot, b.entry, req);
    const answered = ServiceGroupJoinReplySchema.safeParse(b.entry.result);
    if (answered.success) return answered.data;
    // no answer kept: the first join added the member to the round if it got that far
    const round = await this.state.get<ServiceGroupRound>(KV_KEYS.serviceGroup(req.name));
    if (round?.joined.some((j) => j.member === req.member)) return { ok: true, name: round.name, round: round.round, joined: round.joined.length };
    if (Date.now() - b.entry.at < JOIN_STUCK_MS || !(await this.keys.takeOver(slot, b.entry, b.revision))) {
      throw new ReplyError('UNAVAILABLE', `${what}: the first join with this idempotency key is still under way; retry with the same key`);
    }
    return this.joinFirst(slot, b.entry, req);
  }

  /** The key's first join: its answer kept for retries, its key forgotten when the join is refused. */
  private async joinFirst(slot: string, entry: KeyEntry, req: ServiceGroupJoin): Promise<ServiceGroupJoinReply> {
    let reply: ServiceGroupJoinReply;
    try {
      reply = await this.joinOnce(req);
    } catch (e) {
      if (e instanceof ReplyError) await this.keys.forget(slot);
      throw e;
    }
    // not kept: a retry finds the member in its round instead
    await this.keys
      .settle(slot, entry, reply)
      .catch((e: Error) => this.log.warn(`join ${req.name}: cannot keep the answer for its idempotency key: ${e.message}`));
    return reply;
  }

  /** Adds the member to the group's waiting round (a new round when the last one was placed or ended); places a round that is full. */
  private async joinOnce(body: ServiceGroupJoin): Promise<ServiceGroupJoinReply> {
    const now = Date.now();
    const elastic = body.size === undefined ? { min: body.min!, max: body.max!, lastCallMs: body.lastCallMs ?? SERVICE_GROUP_LAST_CALL_MS } : undefined;
    const size = body.size ?? body.max!;
    const shape = (r: Pick<ServiceGroupRound, 'size' | 'elastic'>) => (r.elastic ? `${r.elastic.min} to ${r.elastic.max} members` : `${r.size} members`);
    // the group's secret reaches this member sealed under its key; without one it could not take part
    if (!serviceGroupKeyFrom(body.key))
      throw new ReplyError(
        'BAD_REQUEST',
        `join ${JSON.stringify(body.name)}: key is required: 32 random bytes in base64 that only this member knows (the group's secret comes back sealed under it; docs/api.md)`,
      );
    let mine: ServiceGroupRound | undefined;
    await this.update(body.name, (cur) => {
      if (cur?.state === 'queued')
        throw new ReplyError(
          'CONFLICT',
          `group ${body.name} round ${cur.round} is closed and waiting for ${cur.size} idle agents; join again once it is placed`,
        );
      const fresh = !cur || cur.state !== 'waiting';
      if (!fresh && shape(cur) !== shape({ size, elastic }))
        throw new ReplyError('CONFLICT', `group ${body.name} round ${cur.round} is waiting for ${shape(cur)}, not ${shape({ size, elastic })}`);
      if (!fresh && cur.joined.some((j) => j.member === body.member))
        throw new ReplyError('CONFLICT', `member ${body.member} already joined group ${body.name} round ${cur.round}`);
      // auto goes with either; tcp and nccl with themselves only (torch's ranks all name one backend)
      const asked = body.backend && body.backend !== 'auto' ? body.backend : undefined;
      if (!fresh && asked && cur.backend && cur.backend !== asked)
        throw new ReplyError('CONFLICT', `group ${body.name} round ${cur.round} runs on the ${cur.backend} backend, not ${asked}`);
      const base: ServiceGroupRound = fresh
        ? { name: body.name, size, ...(elastic ? { elastic } : {}), round: (cur?.round ?? 0) + 1, state: 'waiting', joined: [], updatedAt: '' }
        : cur;
      const joined = [
        ...base.joined,
        { member: body.member, ...(body.label ? { label: body.label } : {}), ...(body.hostId ? { hostId: body.hostId } : {}), key: body.key },
      ];
      // the last call starts when min joined (torch's rendezvous); max closes the round at once
      const closesAt = base.closesAt ?? (base.elastic && joined.length >= base.elastic.min ? new Date(now + base.elastic.lastCallMs).toISOString() : undefined);
      mine = { ...base, ...(asked ? { backend: asked } : {}), joined, ...(closesAt ? { closesAt } : {}), updatedAt: new Date(now).toISOString() };
      return mine;
    });
    const round = mine!;
    if (round.joined.length === round.size) await this.place(round);
    else if (round.closesAt) this.watch(round.name, Date.parse(round.closesAt) - Date.now());
    return { ok: true, name: round.name, round: round.round, joined: round.joined.length };
  }

  async leave(body: ServiceGroupLeave): Promise<{ ok: true }> {
    await this.update(body.name, (cur) => {
      if (!cur || (cur.state !== 'waiting' && cur.state !== 'queued') || !cur.joined.some((j) => j.member === body.member)) return undefined;
      const joined = cur.joined.filter((j) => j.member !== body.member);
      // back to waiting, an elastic round reopened at its max (its last call over if below min)
      const { closesAt, ...rest } = cur;
      const open = cur.elastic && joined.length < cur.elastic.min ? {} : closesAt ? { closesAt } : {};
      return { ...rest, ...open, size: cur.elastic?.max ?? cur.size, state: 'waiting', joined, updatedAt: new Date().toISOString() };
    });
    return { ok: true };
  }

  /** Looks at the group again in `ms` (its last call ends then) and every second while it waits. */
  private watch(name: string, ms: number): void {
    this.pending.add(name);
    setTimeout(() => void this.sweep(), Math.max(0, ms) + 5).unref();
  }

  /** Rounds left queued or in their last call by a replica that stopped are picked up by the one that starts. */
  async onApplicationBootstrap(): Promise<void> {
    await this.rounds.start().catch((e) => this.log.warn(`service group mirror: ${(e as Error).message}; reading KV instead`));
    await this.claims.open();
    await this.keys.open();
    for (const r of await this.list().catch(() => [])) if (r.state === 'queued' || (r.state === 'waiting' && r.closesAt)) this.pending.add(r.name);
    this.retry = setInterval(() => {
      void this.sweep();
      void this.resendMissed().catch((e) => this.log.warn(`sending placements again: ${(e as Error).message}`));
      if (++this.ticks % ABANDONED_CHECK_TICKS === 0)
        void this.endAbandoned().catch((e) => this.log.warn(`ending abandoned service groups: ${(e as Error).message}`));
    }, 1000);
    this.retry.unref();
    this.endSub = this.nc.subscribe(this.names.serviceGroups.endWildcard, {
      callback: this.inbound.inbound.event(this.names.serviceGroups.endWildcard, ServiceGroupEndSchema, (end, msg) => this.onEnd(end, msg as Msg)),
    });
    await this.nc.flush();
  }

  /** A group's end event: acted on only when it carries the group's MAC (anyone may publish on svc.g.>). */
  private async onEnd(end: ServiceGroupEnd, msg: Msg): Promise<void> {
    const rec = await this.roundOf(end.groupId);
    const secret = serviceGroupKeyFrom(rec?.secret);
    if (!rec || !secret || msg.subject !== this.names.serviceGroups.end(end.groupId)) return;
    if (!serviceGroupMacValid(serviceGroupKeys(secret).mac, msg.subject, msg.headers, msg.data)) {
      this.inbound.rejected.inc({ subject: this.names.serviceGroups.endWildcard, reason: 'bad_mac' });
      this.dropLog.report('end:bad_mac', `${this.names.serviceGroups.endWildcard}: dropped an end of group ${end.groupId} without its group's MAC`);
      return;
    }
    await this.ended(end.groupId, end);
  }

  /** The current round of the group a group id names, when it is that round. */
  private async roundOf(groupId: string): Promise<ServiceGroupRound | undefined> {
    const cut = groupId.lastIndexOf('_');
    const name = groupId.slice(0, cut);
    if (cut < 1 || !ServiceGroupNameSchema.safeParse(name).success) return undefined;
    const rec = this.rounds.isReady ? this.rounds.get(name) : await this.state.get<ServiceGroupRound>(KV_KEYS.serviceGroup(name));
    return rec && serviceGroupId(rec.name, rec.round) === groupId ? rec : undefined;
  }

  /** Tells a group's members and agents it is over, under its MAC. */
  private publishEnd(rec: ServiceGroupRound, end: ServiceGroupEnd): void {
    const secret = serviceGroupKeyFrom(rec.secret);
    if (!secret || !rec.placed) return;
    const subject = this.names.serviceGroups.end(rec.placed.groupId);
    const body = Buffer.from(JSON.stringify(end));
    const h = headers();
    h.set(SERVICE_GROUP_MAC_HEADER, serviceGroupMac(serviceGroupKeys(secret).mac, subject, undefined, undefined, body));
    this.nc.publish(subject, body, { headers: h });
  }

  onModuleDestroy(): void {
    this.endSub?.unsubscribe();
    clearInterval(this.retry);
    this.rounds.stop();
  }

  /**
   * Placed groups that no agent serves any more (each member agent lost, gone, or heard in a
   * heartbeat since the placement without it) ended while nobody recorded it (a coordinator that
   * was down missed the end event): ended here, so their agents are free again.
   */
  private async endAbandoned(now = Date.now()): Promise<void> {
    const placed = (await this.list()).filter((r) => r.state === 'placed' && r.placed);
    if (!placed.length) return;
    const agents = new Map((await this.agents.heard()).map((a) => [a.agentId, a]));
    for (const r of placed) {
      if (!r.placed) continue;
      const placedAt = Date.parse(r.placedAt ?? r.updatedAt);
      if (now - placedAt < ABANDONED_AFTER_MS) continue;
      const gone = r.placed.members.every((m) => {
        const a = agents.get(m.agentId);
        if (!a || a.state === 'lost') return true;
        const hb = this.agents.servingReport(m.agentId);
        return hb !== undefined && hb.at > placedAt + ABANDONED_AFTER_MS / 2 && !hb.groups.includes(r.placed!.groupId);
      });
      if (!gone) continue;
      const end: ServiceGroupEnd = {
        groupId: r.placed.groupId,
        reason: 'lost',
        who: `its agents (${r.placed.members.map((m) => m.agentName).join(', ')}), which no longer serve it`,
      };
      // a member still waiting hears it too
      this.publishEnd(r, end);
      await this.ended(r.placed.groupId, end);
    }
  }

  private placing = false;

  /** Places every queued round that can be, and closes elastic rounds whose last call is over (one pass at a time). */
  private async sweep(): Promise<void> {
    if (this.placing || this.pending.size === 0) return;
    this.placing = true;
    try {
      for (const name of [...this.pending]) {
        const cur = await this.state.get<ServiceGroupRound>(KV_KEYS.serviceGroup(name));
        if (cur?.state === 'queued') await this.place(cur);
        else if (cur?.state === 'waiting' && cur.closesAt) {
          // closed with the members it has
          if (Date.now() >= Date.parse(cur.closesAt)) await this.place({ ...cur, size: cur.joined.length });
        } else this.pending.delete(name);
      }
    } catch (e) {
      this.log.warn(`placing service groups: ${(e as Error).message}`);
    } finally {
      this.placing = false;
    }
  }

  /** Puts each member of a full round on an idle agent and tells the agents and the members. */
  private async place(round: ServiceGroupRound): Promise<void> {
    const groupId = serviceGroupId(round.name, round.round);
    // the group's store bucket: its name is its capability, so it carries 128 random bits
    const storePrefix = this.names.stores.bucket('svc', randomStoreId());
    const busy = await this.servingAgents();
    const registered = (await this.agents.list()).filter((a) => a.state !== 'lost');
    const tcpAble = registered.filter((a) => a.backends.some((b) => b.name === 'tcp' && b.available));
    const ready = tcpAble.filter((a) => a.state === 'ready' && !busy.has(a.agentId));
    // a job's claim (made before its agents report busy) keeps them too
    const claimed = await Promise.all(ready.map((a) => this.claims.holder(a.agentId).catch(() => null)));
    const idleAny = ready.filter((_, i) => !claimed[i]).sort((a, b) => a.name.localeCompare(b.name));
    const { backend, able, idle } = chooseBackend(round, tcpAble, idleAny);
    const members = round.joined.map((j) => j.member).join();
    const mine = (cur: ServiceGroupRound | undefined, states: ServiceGroupRound['state'][]) =>
      cur && cur.round === round.round && states.includes(cur.state) && cur.joined.map((j) => j.member).join() === members;
    let placed: ServiceGroupPlaced;
    if (idle.length < round.size && able.length >= round.size) {
      // enough agents, some still serving other groups: wait for them (the members' join timeout bounds it)
      if (round.state !== 'queued') {
        const q = await this.update(round.name, (cur) =>
          mine(cur, ['waiting']) ? { ...cur!, size: round.size, state: 'queued', updatedAt: new Date().toISOString() } : undefined,
        );
        if (!mine(q, ['queued'])) return;
        this.log.log(
          `group ${groupId}: ${round.size} members wait for ${round.size} idle ${backend === 'nccl' ? 'nccl ' : ''}agents (${idle.length} idle of ${able.length})`,
        );
      }
      this.pending.add(round.name);
      return;
    }
    if (idle.length < round.size) {
      const error =
        round.backend === 'nccl'
          ? `group ${round.name} round ${round.round}: ${round.size} member${round.size === 1 ? '' : 's'} asked for the nccl backend, the mesh has ${able.length} agent${able.length === 1 ? '' : 's'} with a working one${ncclWhyNot(registered)}`
          : `group ${round.name} round ${round.round}: ${round.size} members need ${round.size} agents, the mesh has ${able.length}`;
      placed = { name: round.name, round: round.round, groupId, size: round.size, members: [], error, joined: round.joined.map((j) => j.member) };
    } else {
      const onHosts = matchHosts(round.joined, idle);
      placed = {
        name: round.name,
        round: round.round,
        groupId,
        size: round.size,
        backend,
        members: round.joined.map((j, rank) => {
          const a = onHosts[rank];
          return {
            rank,
            member: j.member,
            ...(j.label ? { label: j.label } : {}),
            agentId: a.agentId,
            agentName: a.name,
            ...(j.hostId && a.hostId === j.hostId ? { local: true } : {}),
          };
        }),
      };
    }
    // the group's secret: kept in the round (the members' join keys are no longer needed)
    const secret = placed.error ? undefined : newServiceGroupKey();
    const kept = secret ? { secret: secret.toString('base64'), storePrefix } : {};
    const joined = round.joined.map(({ key: _, ...j }) => j);
    // exactly one placement of a round: the one whose write moved it on from waiting or queued
    const at = new Date().toISOString();
    const rec = await this.update(round.name, (cur) =>
      mine(cur, ['waiting', 'queued'])
        ? {
            ...cur!,
            size: round.size,
            state: placed.error ? 'ended' : 'placed',
            joined,
            placed,
            ...kept,
            ...(placed.error ? { endedAt: at } : { placedAt: at }),
            updatedAt: at,
          }
        : undefined,
    );
    this.pending.delete(round.name);
    if (rec?.placed !== placed) return;
    if (placed.error) this.log.warn(placed.error);
    else
      this.log.log(`group ${groupId} on ${placed.backend}: ${placed.members.map((m) => `rank ${m.rank} ${m.label ?? m.member} on ${m.agentName}`).join(', ')}`);
    for (const m of placed.members) this.tellAgent(placed, m.rank, kept.secret!, storePrefix);
    // G sealed per member under the key it joined with: svc.placed is readable by every client
    const sealed = secret
      ? round.joined.map((j, rank) => {
          const key = serviceGroupKeyFrom(j.key);
          return key ? sealServiceGroupSecret(key, secret, groupId, rank) : '';
        })
      : undefined;
    this.nc.publish(this.names.serviceGroups.placed(round.name), JSON.stringify({ ...placed, ...(sealed ? { sealed } : {}) } satisfies ServiceGroupPlaced));
  }

  /** Member `rank`'s agent gets its placement, on the agent's own subject: only its login reads it. */
  private tellAgent(placed: ServiceGroupPlaced, rank: number, secret: string, storePrefix: string): void {
    const m = placed.members[rank];
    const ev: AgentNotification = { type: 'svc-member', rank, placed, secret, storePrefix };
    this.nc.publish(this.names.agents.events(m.agentId), JSON.stringify(ev));
  }

  /** Placements an agent missed (it restarted after it was picked) are sent to it again. */
  private async resendMissed(): Promise<void> {
    for (const { round, rank } of missedPlacements(await this.list(), (id) => this.agents.servingReport(id), this.resent)) {
      const m = round.placed!.members[rank];
      this.log.warn(`group ${round.placed!.groupId}: agent ${m.agentName} (rank ${rank}) does not serve it by its heartbeat: its placement is sent again`);
      this.tellAgent(round.placed!, rank, round.secret!, round.storePrefix!);
    }
  }

  /** A group ended (end event): its round is ended and its store bucket deleted. */
  async ended(groupId: string, end: ServiceGroupEnd): Promise<void> {
    const cut = groupId.lastIndexOf('_');
    const name = groupId.slice(0, cut);
    const round = Number(groupId.slice(cut + 1));
    // any publisher may send an end: only a group id this coordinator could have made names a round
    if (cut < 1 || !/^[1-9][0-9]*$/.test(groupId.slice(cut + 1)) || !ServiceGroupNameSchema.safeParse(name).success) return;
    const rec = await this.update(name, (cur) =>
      cur && cur.round === round && cur.state === 'placed'
        ? { ...cur, state: 'ended', end, endedAt: new Date().toISOString(), updatedAt: new Date().toISOString() }
        : undefined,
    );
    if (rec?.state !== 'ended' || rec.round !== round || !rec.placed) return;
    this.log.log(`group ${groupId} ended: ${end.reason}${end.who ? ` (${end.who})` : ''}${end.error ? `: ${end.error.message}` : ''}`);
    const jsm = await jetstreamManager(this.nc);
    if (rec.storePrefix) await jsm.streams.delete(`KV_${jobBucket(rec.storePrefix)}`).catch(() => undefined);
    void this.sweep();
  }

  /** agentId -> the placed service group it serves */
  async servingAgents(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const r of await this.list()) if (r.state === 'placed') for (const m of r.placed?.members ?? []) out.set(m.agentId, r.placed!.groupId);
    return out;
  }

  async list(): Promise<ServiceGroupRound[]> {
    return this.rounds.isReady
      ? this.rounds.values().sort((a, b) => a.name.localeCompare(b.name))
      : this.state.list<ServiceGroupRound>(KV_KEYS.serviceGroupsPrefix);
  }
}

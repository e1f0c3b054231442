// Collectives as a service, the coordinator's part: rounds of named groups in the state bucket
// (compare-and-set, so replicas agree), the placement of a full round on idle agents (one member
// per agent), and the end of a group (its agents' store bucket deleted, its agents free again).
import { Inject, Injectable, Logger } from '@nestjs/common';
import { JSONCodec, NatsConnection } from 'nats';
import { jobBucket } from '@cmesh/collectives';
import { AgentNotification, ClusterNames, KV_KEYS, SvcEnd, SvcJoin, SvcJoinReply, SvcLeave, SvcNameSchema, SvcPlaced, SvcRound } from '@cmesh/protocol';
import { AgentsService } from '../agents/agents.service';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ReplyError } from '../nats/reply-error';
import { KvState } from '../state/kv-state';

const json = JSONCodec();

/** `<name>_<round>`: the token of a group's subjects (names have no `_`, so ids never meet). */
export const svcGroupId = (name: string, round: number) => `${name}_${round}`;

@Injectable()
export class ServiceGroupsService {
  private readonly log = new Logger('ServiceGroups');

  constructor(
    private readonly state: KvState,
    private readonly agents: AgentsService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {}

  /** Adds the member to the group's waiting round (a new round when the last one was placed or ended); places a round that is full. */
  async join(body: SvcJoin): Promise<SvcJoinReply> {
    const now = () => new Date().toISOString();
    let mine: SvcRound | undefined;
    await this.state.update<SvcRound>(KV_KEYS.svcGroup(body.name), (cur) => {
      const fresh = !cur || cur.state !== 'waiting';
      if (!fresh && cur.size !== body.size) throw new ReplyError('CONFLICT', `group ${body.name} round ${cur.round} is waiting for ${cur.size} members, not ${body.size}`);
      if (!fresh && cur.joined.some((j) => j.member === body.member)) throw new ReplyError('CONFLICT', `member ${body.member} already joined group ${body.name} round ${cur.round}`);
      const base: SvcRound = fresh
        ? { name: body.name, size: body.size, round: (cur?.round ?? 0) + 1, state: 'waiting', joined: [], updatedAt: now() }
        : cur;
      mine = { ...base, joined: [...base.joined, { member: body.member, ...(body.label ? { label: body.label } : {}) }], updatedAt: now() };
      return mine;
    });
    const round = mine!;
    if (round.joined.length === round.size) await this.place(round);
    return { ok: true, name: round.name, round: round.round, joined: round.joined.length };
  }

  async leave(body: SvcLeave): Promise<{ ok: true }> {
    await this.state.update<SvcRound>(KV_KEYS.svcGroup(body.name), (cur) =>
      cur && cur.state === 'waiting' && cur.joined.some((j) => j.member === body.member) ? { ...cur, joined: cur.joined.filter((j) => j.member !== body.member), updatedAt: new Date().toISOString() } : undefined,
    );
    return { ok: true };
  }

  /** Puts each member of a full round on an idle agent and tells the agents and the members. */
  private async place(round: SvcRound): Promise<void> {
    const groupId = svcGroupId(round.name, round.round);
    const storePrefix = `svc-${groupId}`;
    const busy = new Set((await this.list()).filter((r) => r.state === 'placed').flatMap((r) => r.placed?.members.map((m) => m.agentId) ?? []));
    const idle = (await this.agents.list()).filter((a) => a.state === 'ready' && !busy.has(a.agentId) && a.backends.some((b) => b.name === 'tcp' && b.available)).sort((a, b) => a.name.localeCompare(b.name));
    let placed: SvcPlaced;
    if (idle.length < round.size) {
      const error = `group ${round.name} round ${round.round}: ${round.size} members need ${round.size} idle agents, ${idle.length} idle`;
      placed = { name: round.name, round: round.round, groupId, size: round.size, members: [], storePrefix, error, joined: round.joined.map((j) => j.member) };
    } else {
      placed = {
        name: round.name,
        round: round.round,
        groupId,
        size: round.size,
        storePrefix,
        members: round.joined.map((j, rank) => ({ rank, member: j.member, ...(j.label ? { label: j.label } : {}), agentId: idle[rank].agentId, agentName: idle[rank].name })),
      };
    }
    await this.state.update<SvcRound>(KV_KEYS.svcGroup(round.name), (cur) =>
      cur && cur.round === round.round ? { ...cur, state: placed.error ? 'ended' : 'placed', placed, updatedAt: new Date().toISOString() } : undefined,
    );
    if (placed.error) this.log.warn(placed.error);
    else this.log.log(`group ${groupId}: ${placed.members.map((m) => `rank ${m.rank} ${m.label ?? m.member} on ${m.agentName}`).join(', ')}`);
    for (const m of placed.members) {
      const ev: AgentNotification = { type: 'svc-member', rank: m.rank, placed };
      this.nc.publish(this.names.agents.events(m.agentId), json.encode(ev));
    }
    this.nc.publish(this.names.svc.placed(round.name), json.encode(placed));
  }

  /** A group ended (end event): its round is ended and its store bucket deleted. */
  async ended(groupId: string, end: SvcEnd): Promise<void> {
    const cut = groupId.lastIndexOf('_');
    const name = groupId.slice(0, cut);
    const round = Number(groupId.slice(cut + 1));
    // any publisher may send an end: only a group id this coordinator could have made names a round
    if (cut < 1 || !/^[1-9][0-9]*$/.test(groupId.slice(cut + 1)) || !SvcNameSchema.safeParse(name).success) return;
    const rec = await this.state.update<SvcRound>(KV_KEYS.svcGroup(name), (cur) =>
      cur && cur.round === round && cur.state === 'placed' ? { ...cur, state: 'ended', end, updatedAt: new Date().toISOString() } : undefined,
    );
    if (rec?.state !== 'ended' || rec.round !== round || !rec.placed) return;
    this.log.log(`group ${groupId} ended: ${end.reason}${end.who ? ` (${end.who})` : ''}${end.error ? `: ${end.error.message}` : ''}`);
    const jsm = await this.nc.jetstreamManager();
    await jsm.streams.delete(`KV_${jobBucket(rec.placed.storePrefix)}`).catch(() => undefined);
  }

  list(): Promise<SvcRound[]> {
    return this.state.list<SvcRound>(KV_KEYS.svcGroupsPrefix);
  }
}

// Process groups: an id from a KV counter, a store prefix for the members' bootstrap keys,
// membership in KV, and a notification to every member.
import { Inject, Injectable } from '@nestjs/common';
import { NatsConnection } from '@nats-io/nats-core';
import { AgentEvent, ClusterNames, GroupCreate, GroupIdSchema, GroupRecord, KV_KEYS } from '@cmesh/protocol';
import { AgentsService } from '../agents/agents.service';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ReplyError } from '../nats/reply-error';
import { KvState } from '../state/kv-state';

@Injectable()
export class GroupsService {
  constructor(
    private readonly state: KvState,
    private readonly agents: AgentsService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {}

  async create(body: GroupCreate): Promise<GroupRecord> {
    const known = new Map((await this.agents.list()).map((a) => [a.agentId, a]));
    const unknown = body.members.filter((m) => !known.has(m));
    if (unknown.length) throw new ReplyError('BAD_REQUEST', `unknown agents: ${unknown.join(', ')}`);
    const lost = body.members.filter((m) => known.get(m)!.state === 'lost');
    if (lost.length) throw new ReplyError('CONFLICT', `agents are lost: ${lost.join(', ')}`);
    const counter = await this.state.update<number>(KV_KEYS.groupCounter, (n) => (n ?? 0) + 1);
    const id = String(counter);
    const group: GroupRecord = {
      id,
      ...(body.name ? { name: body.name } : {}),
      members: body.members,
      storePrefix: `groups/${id}`,
      createdAt: new Date().toISOString(),
    };
    await this.state.put(KV_KEYS.group(id), group);
    body.members.forEach((agentId, rank) => {
      const ev: AgentEvent = { type: 'group-joined', groupId: id, rank, size: body.members.length, storePrefix: group.storePrefix };
      this.nc.publish(this.names.agents.events(agentId), JSON.stringify(ev));
    });
    return group;
  }

  async get(id: string): Promise<GroupRecord> {
    const g = await this.state.get<GroupRecord>(KV_KEYS.group(id));
    if (!g) throw new ReplyError('NOT_FOUND', `no group ${JSON.stringify(id)}`);
    return g;
  }

  async find(id: string): Promise<GroupRecord | undefined> {
    if (!GroupIdSchema.safeParse(id).success) return undefined; // no such group, and not a KV key either
    return this.state.get<GroupRecord>(KV_KEYS.group(id));
  }

  list(): Promise<GroupRecord[]> {
    return this.state.list<GroupRecord>(KV_KEYS.groupsPrefix);
  }
}

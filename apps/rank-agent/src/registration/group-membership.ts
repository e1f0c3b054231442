// The groups this agent belongs to, as the coordinator notifies them (the cluster's agents.events.<id>,
// AgentEvent 'group-joined'): group id, this agent's rank, size and the group's store prefix.
// Shown by /health; malformed events are logged and dropped.
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AgentEvent, AgentEventSchema, clusterNames } from '@cmesh/protocol';
import type { Subscription } from 'nats';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { InboundMessages } from '../nats/inbound-messages';

export type Membership = Omit<AgentEvent, 'type'>;

@Injectable()
export class GroupMembership implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('Groups');
  private readonly groups = new Map<string, Membership>();
  private sub: Subscription | null = null;

  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    private readonly inbound: InboundMessages,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.sub = await this.inbound.listen(clusterNames(this.config.cluster).agents.events(this.config.agentId), AgentEventSchema, (ev) => {
      const { type: _type, ...m } = ev;
      this.groups.set(m.groupId, m);
      this.log.log(`joined group ${m.groupId} as rank ${m.rank} of ${m.size} (store prefix ${m.storePrefix})`);
    });
  }

  list(): Membership[] {
    return [...this.groups.values()];
  }

  onApplicationShutdown(): void {
    this.sub?.unsubscribe();
  }
}

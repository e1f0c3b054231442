// The groups this agent belongs to, as the coordinator notifies them (the cluster's
// agents.events.<id>, AgentEvent 'group-joined'): group id, this agent's rank, size and the
// group's store prefix. Shown by /health. Service placements ('svc-member') go to ServiceGroupWorkers.
// Malformed events are counted, logged and dropped by the InboundTransport.
import { Controller, Injectable, Logger, UseFilters } from '@nestjs/common';
import { EventPattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { AgentEvent, AgentNotification, AgentNotificationSchema } from '@cmesh/protocol';
import { ServiceGroupWorkers } from '../service-groups/service-group-workers';

export type Membership = Omit<AgentEvent, 'type'>;

@Injectable()
export class GroupMembership {
  private readonly log = new Logger('Groups');
  private readonly groups = new Map<string, Membership>();

  joined(ev: AgentEvent): void {
    const { type: _type, ...m } = ev;
    this.groups.set(m.groupId, m);
    this.log.log(`joined group ${m.groupId} as rank ${m.rank} of ${m.size} (store prefix ${m.storePrefix})`);
  }

  list(): Membership[] {
    return [...this.groups.values()];
  }
}

/** agents.events.<this agent's id> */
@Controller()
@UseFilters(InboundErrors)
export class GroupEvents {
  constructor(
    private readonly membership: GroupMembership,
    private readonly service: ServiceGroupWorkers,
  ) {}

  @EventPattern('agents.events', { schema: AgentNotificationSchema })
  event(ev: AgentNotification): void {
    if (ev.type === 'svc-member') this.service.start(ev);
    else this.membership.joined(ev);
  }
}

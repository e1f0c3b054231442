// NATS for collectives as a service: svc.join / svc.leave requests (one replica answers) and every
// group's end event (svc.g.*.end; replicas race to mark the round ended, compare-and-set decides).
import { Controller, UseFilters } from '@nestjs/common';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { SvcEnd, SvcEndSchema, SvcJoin, SvcJoinSchema, SvcLeave, SvcLeaveSchema } from '@cmesh/protocol';
import { ServiceGroupsService } from './service.service';

@Controller()
@UseFilters(InboundErrors)
export class ServiceNats {
  constructor(private readonly svc: ServiceGroupsService) {}

  @MessagePattern('svc.join', { schema: SvcJoinSchema })
  join(body: SvcJoin) {
    return this.svc.join(body);
  }

  @MessagePattern('svc.leave', { schema: SvcLeaveSchema })
  leave(body: SvcLeave) {
    return this.svc.leave(body);
  }

  @EventPattern('svc.endWildcard', { schema: SvcEndSchema })
  ended(body: SvcEnd) {
    return this.svc.ended(body.groupId, body);
  }
}

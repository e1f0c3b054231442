// NATS for collectives as a service: svc.join / svc.leave requests (one replica answers). Every
// group's end event (svc.g.*.end) is ServiceGroupsService's own subscription: it checks the
// group's MAC, which needs the message's headers.
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { SvcJoin, SvcJoinSchema, SvcLeave, SvcLeaveSchema } from '@cmesh/protocol';
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
}

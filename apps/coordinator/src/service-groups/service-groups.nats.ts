// NATS for collectives as a service: svc.join / svc.leave requests (one replica answers). Every
// group's end event (svc.g.*.end) is ServiceGroupsService's own subscription: it checks the
// group's MAC, which needs the message's headers.
import { Controller, Inject, UseFilters } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { NatsConnection } from '@nats-io/nats-core';
import { InboundContext, InboundErrors } from '@cmesh/protocol/nest';
import { NATS_CONNECTION } from '../nats/nats.module';
import { natsPrincipal } from '../idempotency/principal';
import { ServiceGroupJoin, ServiceGroupJoinSchema, ServiceGroupLeave, ServiceGroupLeaveSchema } from '@cmesh/protocol';
import { ServiceGroupsService } from './service-groups.service';

@Controller()
@UseFilters(InboundErrors)
export class ServiceGroupsNats {
  constructor(
    private readonly serviceGroups: ServiceGroupsService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
  ) {}

  @MessagePattern('serviceGroups.join', { schema: ServiceGroupJoinSchema })
  join(@Payload() body: ServiceGroupJoin, @Ctx() ctx: InboundContext) {
    return this.serviceGroups.join(body, natsPrincipal(ctx.reply, !!this.nc.info?.auth_required));
  }

  @MessagePattern('serviceGroups.leave', { schema: ServiceGroupLeaveSchema })
  leave(body: ServiceGroupLeave) {
    return this.serviceGroups.leave(body);
  }
}

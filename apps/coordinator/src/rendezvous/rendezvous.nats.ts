// NATS for rendezvous: the cluster's rdzv.join/get/leave (InboundTransport validates).
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { NodeIdSchema, RdzvGetSchema, RdzvJoin, RdzvJoinSchema, RdzvLeaveSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { RendezvousService } from './rendezvous.service';

/** over NATS a get may name the asking node, whose rank it then answers */
const RdzvGetByNodeSchema = RdzvGetSchema.extend({ nodeId: NodeIdSchema.optional() });

@Controller()
@UseFilters(InboundErrors)
export class RendezvousNats {
  constructor(private readonly rdzv: RendezvousService) {}

  @MessagePattern('rdzv.join', { schema: RdzvJoinSchema })
  join(body: RdzvJoin) {
    return this.rdzv.join(body);
  }

  @MessagePattern('rdzv.get', { schema: RdzvGetByNodeSchema })
  get({ runId, nodeId }: z.infer<typeof RdzvGetByNodeSchema>) {
    return this.rdzv.get(runId, nodeId);
  }

  @MessagePattern('rdzv.leave', { schema: RdzvLeaveSchema })
  leave({ runId, nodeId }: z.infer<typeof RdzvLeaveSchema>) {
    return this.rdzv.leave(runId, nodeId);
  }
}

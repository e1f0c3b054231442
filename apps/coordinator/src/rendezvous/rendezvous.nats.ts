// NATS for rendezvous: the cluster's rdzv.join/get/leave (InboundTransport validates).
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { JsonText, NodeIdSchema, briefReply, RdzvGetSchema, RdzvJoin, RdzvJoinSchema, RdzvLeaveSchema, RdzvRecord, RdzvReply } from '@cmesh/protocol';
import { z } from 'zod';
import { RendezvousService } from './rendezvous.service';

/** over NATS a get may name the asking node, whose rank it then answers */
const RdzvGetByNodeSchema = RdzvGetSchema.extend({ nodeId: NodeIdSchema.optional() });

@Controller()
@UseFilters(InboundErrors)
export class RendezvousNats {
  /** a round's JSON, encoded once for all the joiners answered with the same record */
  private readonly encoded = new WeakMap<RdzvRecord, string>();

  constructor(private readonly rdzv: RendezvousService) {}

  @MessagePattern('rdzv.join', { schema: RdzvJoinSchema })
  async join(body: RdzvJoin) {
    const r = await this.rdzv.join(body);
    return body.brief ? briefReply(r, body.nodeId) : this.encode(r);
  }

  private encode(r: RdzvReply): JsonText {
    let record = this.encoded.get(r.record);
    if (record === undefined) this.encoded.set(r.record, (record = JSON.stringify(r.record)));
    return new JsonText(`{"ok":true,"record":${record}${r.rank !== undefined ? `,"rank":${r.rank}` : ''}}`);
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

// REST for rendezvous, validated and answered like every controller (ApiInput, HttpErrorFilter).
import { Controller, Get, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import {
  RdzvGetSchema,
  RdzvJoin,
  RdzvJoinSchema,
  RdzvLeaveSchema,
  RdzvRecord,
  RdzvRecordSchema,
  RdzvBriefReply,
  RdzvBriefReplySchema,
  RdzvReply,
  RdzvReplySchema,
  briefReply,
} from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { RendezvousService } from './rendezvous.service';

const fromPath = { params: { runId: 'runId' } };

@ApiTags('rendezvous')
@Controller('rendezvous')
export class RendezvousController {
  constructor(private readonly rdzv: RendezvousService) {}

  @Get()
  @ApiOperation({ summary: 'every rendezvous with its round and state' })
  @ApiZodResponse(z.object({ rendezvous: z.array(RdzvRecordSchema) }))
  async list(): Promise<{ rendezvous: RdzvRecord[] }> {
    return { rendezvous: await this.rdzv.list() };
  }

  @Get(':runId')
  @ApiOperation({ summary: 'a rendezvous (closes it when its last call is over)' })
  @ApiZodResponse(RdzvReplySchema, { errors: [400, 404] })
  get(@ApiInput(RdzvGetSchema, fromPath) { runId }: z.infer<typeof RdzvGetSchema>): Promise<RdzvReply> {
    return this.rdzv.get(runId);
  }

  @Post(':runId/join')
  @ApiOperation({ summary: 'join: {nodeId, minNodes, maxNodes, lastCallMs, brief}; rank once the round closes (brief: rank and size only)' })
  @ApiZodBody(RdzvJoinSchema, 'runId')
  @ApiZodResponse(z.union([RdzvReplySchema, RdzvBriefReplySchema]), { status: 201, errors: [400, 409] })
  async join(@ApiInput(RdzvJoinSchema, { body: true, ...fromPath }) body: RdzvJoin): Promise<RdzvReply | RdzvBriefReply> {
    const r = await this.rdzv.join(body);
    return body.brief ? briefReply(r, body.nodeId) : r;
  }

  @Post(':runId/leave')
  @ApiOperation({ summary: 'a node leaves (or is reported lost): the next round opens (a waiting node just stops waiting); 404 if not in the run' })
  @ApiZodBody(RdzvLeaveSchema, 'runId')
  @ApiZodResponse(RdzvReplySchema, { status: 201, errors: [400, 404] })
  leave(@ApiInput(RdzvLeaveSchema, { body: true, ...fromPath }) b: z.infer<typeof RdzvLeaveSchema>): Promise<RdzvReply> {
    return this.rdzv.leave(b.runId, b.nodeId);
  }
}

import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { RdzvGetSchema, RdzvJoinSchema, RdzvLeaveSchema, RdzvRecord, RdzvRecordSchema, RdzvReply, RdzvReplySchema } from '@cmesh/protocol';
import { z } from 'zod';
import { parseBody } from '../nats/parse-body';
import { rest } from '../nats/reply-error';
import { RendezvousService } from './rendezvous.service';
import { ApiZodBody, ApiZodResponse } from '../nats/openapi-body';

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
  get(@Param('runId') runId: string): Promise<RdzvReply> {
    return rest(this.rdzv.get(parseBody(RdzvGetSchema, { runId }).runId));
  }

  @Post(':runId/join')
  @ApiOperation({ summary: 'join: {nodeId, minNodes, maxNodes, lastCallMs}; rank once the round closes' })
  @ApiZodBody(RdzvJoinSchema, 'runId')
  @ApiZodResponse(RdzvReplySchema, { status: 201, errors: [400, 409] })
  join(@Param('runId') runId: string, @Body() body: unknown): Promise<RdzvReply> {
    return rest(this.rdzv.join(parseBody(RdzvJoinSchema, { ...(body as object), runId })));
  }

  @Post(':runId/leave')
  @ApiOperation({ summary: 'a node leaves (or is reported lost): the next round opens (a waiting node just stops waiting); 404 if not in the run' })
  @ApiZodBody(RdzvLeaveSchema, 'runId')
  @ApiZodResponse(RdzvReplySchema, { status: 201, errors: [400, 404] })
  leave(@Param('runId') runId: string, @Body() body: unknown): Promise<RdzvReply> {
    const b = parseBody(RdzvLeaveSchema, { ...(body as object), runId });
    return rest(this.rdzv.leave(b.runId, b.nodeId));
  }
}

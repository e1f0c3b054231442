import { Body, Controller, Delete, Get, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { AgentDeregisterSchema, AgentHeartbeatSchema, AgentRecord, AgentRecordSchema, AgentRegisterSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { parseBody } from '../nats/parse-body';
import { rest } from '../nats/reply-error';
import { AgentsService } from './agents.service';
import { ApiZodBody, ApiZodResponse } from '../nats/openapi-body';

/** The id in the URL, checked like the NATS body's (a bad one is a 400 naming it, before any KV access). */
function agentId(id: string): string {
  return parseBody(AgentDeregisterSchema, { agentId: id }).agentId;
}

@ApiTags('agents')
@Controller('agents')
export class AgentsController {
  constructor(private readonly agents: AgentsService) {}

  @Get()
  @ApiOperation({ summary: 'every registered agent with its state (ready, busy, lost)' })
  @ApiZodResponse(z.object({ agents: z.array(AgentRecordSchema) }))
  async list(): Promise<{ agents: AgentRecord[] }> {
    return { agents: await this.agents.list() };
  }

  @Get(':id')
  @ApiOperation({ summary: 'one agent' })
  @ApiZodResponse(AgentRecordSchema, { errors: [400, 404] })
  get(@Param('id') id: string): Promise<AgentRecord> {
    return rest(this.agents.get(agentId(id)));
  }

  @Post()
  @ApiOperation({ summary: 'register an agent (same body as NATS cmesh.agents.register)' })
  @ApiZodBody(AgentRegisterSchema)
  @ApiZodResponse(AgentRecordSchema, { status: 201 })
  register(@Body() body: unknown): Promise<AgentRecord> {
    return rest(this.agents.register(parseBody(AgentRegisterSchema, body)));
  }

  @Post(':id/heartbeat')
  @ApiOperation({ summary: 'heartbeat' })
  @ApiZodBody(AgentHeartbeatSchema, 'agentId')
  @ApiZodResponse(AgentRecordSchema, { status: 201, errors: [400, 404] })
  heartbeat(@Param('id') id: string, @Body() body: unknown): Promise<AgentRecord> {
    return rest(this.agents.heartbeat(parseBody(AgentHeartbeatSchema, { ...(body as object), agentId: id })));
  }

  @Delete(':id')
  @ApiOperation({ summary: 'deregister an agent' })
  @ApiZodResponse(AgentRecordSchema, { errors: [400, 404] })
  deregister(@Param('id') id: string): Promise<AgentRecord> {
    return rest(this.agents.deregister(agentId(id)));
  }
}

// REST for agents: the NATS operations' schemas validate the input (ApiInput), refusals become
// their HTTP status (HttpErrorFilter).
import { Controller, Delete, Get, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import {
  AgentDeregisterSchema,
  AgentHeartbeat,
  AgentHeartbeatSchema,
  AgentRecord,
  AgentRecordSchema,
  AgentRegister,
  AgentRegisterSchema,
} from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { AgentsService } from './agents.service';

/** The id in the URL, checked like the NATS body's (a bad one is a 400 naming it, before any KV access). */
const AgentIdParam = () => ApiInput(AgentDeregisterSchema, { params: { agentId: 'id' } });
type AgentIdInput = z.infer<typeof AgentDeregisterSchema>;

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
  get(@AgentIdParam() { agentId }: AgentIdInput): Promise<AgentRecord> {
    return this.agents.get(agentId);
  }

  @Post()
  @ApiOperation({ summary: 'register an agent (same body as NATS cmesh.agents.register)' })
  @ApiZodBody(AgentRegisterSchema)
  @ApiZodResponse(AgentRecordSchema, { status: 201 })
  register(@ApiInput(AgentRegisterSchema) body: AgentRegister): Promise<AgentRecord> {
    return this.agents.register(body);
  }

  @Post(':id/heartbeat')
  @ApiOperation({ summary: 'heartbeat' })
  @ApiZodBody(AgentHeartbeatSchema, 'agentId')
  @ApiZodResponse(AgentRecordSchema, { status: 201, errors: [400, 404] })
  heartbeat(@ApiInput(AgentHeartbeatSchema, { body: true, params: { agentId: 'id' } }) body: AgentHeartbeat): Promise<AgentRecord> {
    return this.agents.heartbeat(body);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'deregister an agent' })
  @ApiZodResponse(AgentRecordSchema, { errors: [400, 404] })
  deregister(@AgentIdParam() { agentId }: AgentIdInput): Promise<AgentRecord> {
    return this.agents.deregister(agentId);
  }
}

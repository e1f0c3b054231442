// NATS for agents: the cluster's agents.register/heartbeat/deregister/list, each body validated
// with its schema by the InboundTransport (see @cmesh/protocol/nest).
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { AgentDeregisterSchema, AgentHeartbeat, AgentHeartbeatReply, AgentHeartbeatSchema, AgentRegister, AgentRegisterSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { AgentsService } from './agents.service';

@Controller()
@UseFilters(InboundErrors)
export class AgentsNats {
  constructor(private readonly agents: AgentsService) {}

  @MessagePattern('agents.register', { schema: AgentRegisterSchema })
  async register(body: AgentRegister) {
    return this.agents.reply(await this.agents.register(body));
  }

  @MessagePattern('agents.heartbeat', { schema: AgentHeartbeatSchema })
  async heartbeat(body: AgentHeartbeat): Promise<AgentHeartbeatReply> {
    // thousands a second at scale: a few bytes each, not the record
    return this.agents.heartbeatReply(await this.agents.beat(body));
  }

  @MessagePattern('agents.deregister', { schema: AgentDeregisterSchema })
  async deregister({ agentId }: z.infer<typeof AgentDeregisterSchema>) {
    return this.agents.reply(await this.agents.deregister(agentId));
  }

  @MessagePattern('agents.list', { schema: z.object({}).passthrough() })
  async list() {
    return { ok: true, agents: await this.agents.list() };
  }
}

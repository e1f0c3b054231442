// NATS for agents: register/heartbeat/deregister on the agent's own subject
// (`agents.register.<id>`, which only that agent's login may publish on) and agents.list, each
// body validated with its schema by the InboundTransport (see @cmesh/protocol/nest). The agent's
// identity is the subject's: a body naming another agent is refused, so no login can register,
// beat for or deregister an agent other than itself.
import { Controller, UseFilters } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { InboundContext, InboundErrors } from '@cmesh/protocol/nest';
import {
  AgentDeregisterSchema,
  AgentHeartbeat,
  AgentHeartbeatReply,
  AgentHeartbeatSchema,
  AgentRegister,
  AgentRegisterSchema,
  subjectAgent,
} from '@cmesh/protocol';
import { z } from 'zod';
import { ReplyError } from '../nats/reply-error';
import { AgentsService } from './agents.service';

/** The body's agent id when it is the subject's; FORBIDDEN otherwise. */
function sameAgent(body: { agentId: string }, ctx: InboundContext): string {
  const id = subjectAgent(ctx.subject);
  if (body.agentId !== id)
    throw new ReplyError('FORBIDDEN', `the message names agent ${JSON.stringify(body.agentId)} but came on agent ${JSON.stringify(id)}'s subject`);
  return id;
}

@Controller()
@UseFilters(InboundErrors)
export class AgentsNats {
  constructor(private readonly agents: AgentsService) {}

  @MessagePattern('agents.registerWildcard', { schema: AgentRegisterSchema })
  async register(@Payload() body: AgentRegister, @Ctx() ctx: InboundContext) {
    sameAgent(body, ctx);
    return this.agents.reply(await this.agents.register(body));
  }

  @MessagePattern('agents.heartbeatWildcard', { schema: AgentHeartbeatSchema })
  async heartbeat(@Payload() body: AgentHeartbeat, @Ctx() ctx: InboundContext): Promise<AgentHeartbeatReply> {
    sameAgent(body, ctx);
    // thousands a second at scale: a few bytes each, not the record
    return this.agents.heartbeatReply(await this.agents.beat(body));
  }

  @MessagePattern('agents.deregisterWildcard', { schema: AgentDeregisterSchema })
  async deregister(@Payload() body: z.infer<typeof AgentDeregisterSchema>, @Ctx() ctx: InboundContext) {
    return this.agents.reply(await this.agents.deregister(sameAgent(body, ctx)));
  }

  @MessagePattern('agents.list', { schema: z.object({}).passthrough() })
  async list() {
    return { ok: true, agents: await this.agents.list() };
  }
}

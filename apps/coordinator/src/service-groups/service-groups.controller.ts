// REST for collectives as a service: the groups (current round, members and where they run, how
// they ended) and, for one placed group, the op each rank runs now. Read-only: members join and
// leave over NATS (docs/api.md, "Collectives as a service").
import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { ServiceGroupSummary, ServiceGroupDetail, ServiceGroupDetailSchema, ServiceGroupGetSchema, ServiceGroupSummarySchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodResponse } from '../http/openapi';
import { ServiceGroupsView } from './service-groups.view';

@ApiTags('service-groups')
@Controller('service-groups')
export class ServiceGroupsController {
  constructor(private readonly view: ServiceGroupsView) {}

  @Get()
  @ApiOperation({ summary: "every service group's current round: state, members in rank order with their agents, when it was placed and ended, and why" })
  @ApiZodResponse(z.object({ groups: z.array(ServiceGroupSummarySchema) }))
  async list(): Promise<{ groups: ServiceGroupSummary[] }> {
    return { groups: await this.view.list() };
  }

  @Get(':name')
  @ApiOperation({ summary: 'one service group; a placed one with the op each rank runs now (ranks that did not answer within waitMs are listed as missing)' })
  @ApiZodResponse(ServiceGroupDetailSchema, { errors: [400, 404] })
  get(
    @ApiInput(ServiceGroupGetSchema, { params: { name: 'name' }, query: { waitMs: Number } }) q: z.infer<typeof ServiceGroupGetSchema>,
  ): Promise<ServiceGroupDetail> {
    return this.view.get(q.name, q.waitMs);
  }
}

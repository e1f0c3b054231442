// REST for collectives as a service: the groups (current round, members and where they run, how
// they ended) and, for one placed group, the op each rank runs now. Read-only: members join and
// leave over NATS (docs/api.md, "Collectives as a service").
import { Controller, Get, UseFilters } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { SvcGroup, SvcGroupDetail, SvcGroupDetailSchema, SvcGroupGetSchema, SvcGroupSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiErrorFilter } from '../http/api-error.filter';
import { ApiInput } from '../http/api-input';
import { ApiZodResponse } from '../http/openapi';
import { ServiceGroupsView } from './service-groups.view';

@ApiTags('service-groups')
@Controller('service-groups')
@UseFilters(ApiErrorFilter)
export class ServiceGroupsController {
  constructor(private readonly view: ServiceGroupsView) {}

  @Get()
  @ApiOperation({ summary: "every service group's current round: state, members in rank order with their agents, when it was placed and ended, and why" })
  @ApiZodResponse(z.object({ groups: z.array(SvcGroupSchema) }))
  async list(): Promise<{ groups: SvcGroup[] }> {
    return { groups: await this.view.list() };
  }

  @Get(':name')
  @ApiOperation({ summary: 'one service group; a placed one with the op each rank runs now (ranks that did not answer within waitMs are listed as missing)' })
  @ApiZodResponse(SvcGroupDetailSchema, { errors: [400, 404] })
  get(@ApiInput(SvcGroupGetSchema, { params: { name: 'name' }, query: { waitMs: Number } }) q: z.infer<typeof SvcGroupGetSchema>): Promise<SvcGroupDetail> {
    return this.view.get(q.name, q.waitMs);
  }
}

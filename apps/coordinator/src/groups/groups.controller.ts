// REST for process groups, validated and answered like every controller (ApiInput, HttpErrorFilter).
import { Controller, Get, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { GroupCreate, GroupCreateSchema, GroupGetSchema, GroupRecord, GroupRecordSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { GroupsService } from './groups.service';

@ApiTags('groups')
@Controller('groups')
export class GroupsController {
  constructor(private readonly groups: GroupsService) {}

  @Get()
  @ApiOperation({ summary: 'every process group' })
  @ApiZodResponse(z.object({ groups: z.array(GroupRecordSchema) }))
  async list(): Promise<{ groups: GroupRecord[] }> {
    return { groups: await this.groups.list() };
  }

  @Get(':id')
  @ApiOperation({ summary: 'one process group: members in rank order and its store prefix' })
  @ApiZodResponse(GroupRecordSchema, { errors: [400, 404] })
  get(@ApiInput(GroupGetSchema, { params: { id: 'id' } }) { id }: z.infer<typeof GroupGetSchema>): Promise<GroupRecord> {
    return this.groups.get(id);
  }

  @Post()
  @ApiOperation({ summary: 'create a group from agent ids in rank order: {members, name?}' })
  @ApiZodBody(GroupCreateSchema)
  @ApiZodResponse(GroupRecordSchema, { status: 201, errors: [400, 409] })
  create(@ApiInput(GroupCreateSchema) body: GroupCreate): Promise<GroupRecord> {
    return this.groups.create(body);
  }
}

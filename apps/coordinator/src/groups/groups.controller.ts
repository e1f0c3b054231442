import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { GroupCreateSchema, GroupGetSchema, GroupRecord, GroupRecordSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { parseBody } from '../nats/parse-body';
import { rest } from '../nats/reply-error';
import { GroupsService } from './groups.service';
import { ApiZodBody, ApiZodResponse } from '../nats/openapi-body';

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
  get(@Param('id') id: string): Promise<GroupRecord> {
    return rest(this.groups.get(parseBody(GroupGetSchema, { id }).id));
  }

  @Post()
  @ApiOperation({ summary: 'create a group from agent ids in rank order: {members, name?}' })
  @ApiZodBody(GroupCreateSchema)
  @ApiZodResponse(GroupRecordSchema, { status: 201, errors: [400, 409] })
  create(@Body() body: unknown): Promise<GroupRecord> {
    return rest(this.groups.create(parseBody(GroupCreateSchema, body)));
  }
}

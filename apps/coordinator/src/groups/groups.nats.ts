// NATS for process groups: the cluster's groups.create/get/list (InboundTransport validates).
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { GroupCreate, GroupCreateSchema, GroupGetSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { GroupsService } from './groups.service';

@Controller()
@UseFilters(InboundErrors)
export class GroupsNats {
  constructor(private readonly groups: GroupsService) {}

  @MessagePattern('groups.create', { schema: GroupCreateSchema })
  async create(body: GroupCreate) {
    return { ok: true, group: await this.groups.create(body) };
  }

  @MessagePattern('groups.get', { schema: GroupGetSchema })
  async get({ id }: z.infer<typeof GroupGetSchema>) {
    return { ok: true, group: await this.groups.get(id) };
  }

  @MessagePattern('groups.list', { schema: z.object({}).passthrough() })
  async list() {
    return { ok: true, groups: await this.groups.list() };
  }
}

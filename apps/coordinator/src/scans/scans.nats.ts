// NATS for scans: <cluster>.scans.run/get/list (one coordinator replica answers each).
import { Controller, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { ScanGet, ScanGetSchema, ScanList, ScanListSchema, ScanRequest, ScanRequestSchema } from '@cmesh/protocol';
import { ScansService } from './scans.service';

@Controller()
@UseFilters(InboundErrors)
export class ScansNats {
  constructor(private readonly scans: ScansService) {}

  @MessagePattern('scans.run', { schema: ScanRequestSchema })
  async run(req: ScanRequest) {
    return { ok: true, scan: await this.scans.start(req) };
  }

  @MessagePattern('scans.get', { schema: ScanGetSchema })
  async get({ id }: ScanGet) {
    return { ok: true, scan: await this.scans.find(id) };
  }

  @MessagePattern('scans.list', { schema: ScanListSchema })
  async list({ limit }: ScanList) {
    return { ok: true, scans: await this.scans.list(limit) };
  }
}

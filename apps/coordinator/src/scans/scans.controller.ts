// REST: POST /scans (starts a scan, 202 with its first record), GET /scans, GET /scans/:id. The
// same operations are on NATS (<cluster>.scans.run/get/list).
import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ScanGet, ScanGetSchema, ScanList, ScanListSchema, ScanRecord, ScanRecordSchema, ScanRequest, ScanRequestSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { ScansService } from './scans.service';

@ApiTags('scans')
@Controller('scans')
export class ScansController {
  constructor(private readonly scans: ScansService) {}

  @Post()
  @HttpCode(202)
  @ApiOperation({
    summary:
      'scan the fabric: every pair of agents (sendRecv), ring all-reduce over all and the halves, slow agents and links flagged; runs in the background, 409 while a scan runs. ' +
      'With `gate` (failOnFlagged, minBusBwGBs, minLinkBandwidthGBs, maxLatencyUs) the finished record carries `gate: { passed, failures, met }`: a pre-flight check before a job',
  })
  @ApiZodBody(ScanRequestSchema)
  @ApiZodResponse(ScanRecordSchema, { status: 202, errors: [400, 404, 409] })
  start(@ApiInput(ScanRequestSchema) req: ScanRequest): Promise<ScanRecord> {
    return this.scans.start(req);
  }

  @Get()
  @ApiOperation({ summary: 'recent scans, newest first' })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiZodResponse(z.object({ scans: z.array(ScanRecordSchema) }))
  async list(@ApiInput(ScanListSchema, { query: { limit: Number } }) { limit }: ScanList): Promise<{ scans: ScanRecord[] }> {
    return { scans: await this.scans.list(limit) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'one scan: progress, the pairwise matrix, collectives, findings' })
  @ApiZodResponse(ScanRecordSchema, { errors: [400, 404] })
  get(@ApiInput(ScanGetSchema, { params: { id: 'id' } }) { id }: ScanGet): Promise<ScanRecord> {
    return this.scans.find(id);
  }
}

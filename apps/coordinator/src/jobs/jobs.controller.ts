// REST: POST /jobs, GET /jobs, GET /jobs/:id, DELETE /jobs/:id (cancel). The same operations
// are on NATS (JOB_SUBJECTS.submit/get/list), served by JobsService. Bodies are validated with
// the protocol's schemas and errors have the shape of every other controller's (parseBody, rest).
import { Body, Controller, Delete, Get, Param, Post, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { JobGetSchema, JobListSchema, JobRecord, JobRecordSchema, JobRequestSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiZodBody, ApiZodResponse } from '../nats/openapi-body';
import { parseBody } from '../nats/parse-body';
import { rest } from '../nats/reply-error';
import { JobsService } from './jobs.service';

@ApiTags('jobs')
@Controller('jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  @ApiOperation({ summary: 'submit a collective sweep to agents (by name, a group, or nranks idle ones); 409 when they are busy and onBusy is refuse' })
  @ApiZodBody(JobRequestSchema)
  @ApiZodResponse(JobRecordSchema, { status: 201, errors: [400, 404, 409] })
  submit(@Body() body: unknown): Promise<JobRecord> {
    return rest(this.jobs.submit(parseBody(JobRequestSchema, body)));
  }

  @Get()
  @ApiOperation({ summary: 'recent jobs, newest first' })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiZodResponse(z.object({ jobs: z.array(JobRecordSchema) }))
  async list(@Query('limit') limit?: string): Promise<{ jobs: JobRecord[] }> {
    // a query string is text: a non-number becomes NaN, which the schema refuses
    const q = parseBody(JobListSchema, limit === undefined ? {} : { limit: Number(limit) });
    return { jobs: await this.jobs.list(q.limit) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'one job: state, members, nccl-tests rows' })
  @ApiZodResponse(JobRecordSchema, { errors: [400, 404] })
  get(@Param('id') id: string): Promise<JobRecord> {
    return rest(this.jobs.find(parseBody(JobGetSchema, { id }).id));
  }

  @Delete(':id')
  @ApiOperation({ summary: 'cancel a queued or running job' })
  @ApiZodResponse(JobRecordSchema, { errors: [400, 404] })
  cancel(@Param('id') id: string): Promise<JobRecord> {
    return rest(this.jobs.cancel(parseBody(JobGetSchema, { id }).id));
  }
}

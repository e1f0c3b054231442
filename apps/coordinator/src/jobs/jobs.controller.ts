// REST: POST /jobs, GET /jobs, GET /jobs/:id, DELETE /jobs/:id (cancel). The same operations
// are on NATS (the cluster's jobs.submit/get/list), served by JobsService. Input is validated
// with the protocol's schemas (ApiInput) and errors have the shape of every other controller's
// (ApiErrorFilter).
import { Controller, Delete, Get, Post, UseFilters } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { JobGet, JobGetSchema, JobList, JobListSchema, JobRecord, JobRecordSchema, JobRequest, JobRequestSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiErrorFilter } from '../http/api-error.filter';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { JobsService } from './jobs.service';

const JobIdParam = () => ApiInput(JobGetSchema, { params: { id: 'id' } });

@ApiTags('jobs')
@Controller('jobs')
@UseFilters(ApiErrorFilter)
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  @ApiOperation({ summary: 'submit a collective sweep to agents (by name, a group, or nranks idle ones); 409 when they are busy and onBusy is refuse' })
  @ApiZodBody(JobRequestSchema)
  @ApiZodResponse(JobRecordSchema, { status: 201, errors: [400, 404, 409, 429] })
  submit(@ApiInput(JobRequestSchema) req: JobRequest): Promise<JobRecord> {
    return this.jobs.submit(req);
  }

  @Get()
  @ApiOperation({ summary: 'recent jobs, newest first' })
  @ApiQuery({ name: 'limit', required: false, type: Number })
  @ApiZodResponse(z.object({ jobs: z.array(JobRecordSchema) }))
  async list(@ApiInput(JobListSchema, { query: { limit: Number } }) { limit }: JobList): Promise<{ jobs: JobRecord[] }> {
    // a query string is text: a non-number becomes NaN, which the schema refuses
    return { jobs: await this.jobs.list(limit) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'one job: state, members, nccl-tests rows' })
  @ApiZodResponse(JobRecordSchema, { errors: [400, 404] })
  get(@JobIdParam() { id }: JobGet): Promise<JobRecord> {
    return this.jobs.find(id);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'cancel a queued or running job' })
  @ApiZodResponse(JobRecordSchema, { errors: [400, 404] })
  cancel(@JobIdParam() { id }: JobGet): Promise<JobRecord> {
    return this.jobs.cancel(id);
  }
}

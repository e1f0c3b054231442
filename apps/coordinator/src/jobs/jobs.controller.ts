// REST: POST /jobs, GET /jobs, GET /jobs/:id, DELETE /jobs/:id (cancel). The same operations
// are on NATS (JOB_SUBJECTS.submit/get/list), served by JobsService. Bodies are validated with
// the protocol's schemas and errors have the shape of every other controller's (parseBody, rest).
import { Body, Controller, Delete, Get, Param, Post, Query } from '@nestjs/common';
import { JobGetSchema, JobListSchema, JobRecord, JobRequestSchema } from '@cmesh/protocol';
import { parseBody } from '../nats/parse-body';
import { rest } from '../nats/reply-error';
import { JobsService } from './jobs.service';

@Controller('jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  submit(@Body() body: unknown): Promise<JobRecord> {
    return rest(this.jobs.submit(parseBody(JobRequestSchema, body)));
  }

  @Get()
  async list(@Query('limit') limit?: string): Promise<{ jobs: JobRecord[] }> {
    // a query string is text: a non-number becomes NaN, which the schema refuses
    const q = parseBody(JobListSchema, limit === undefined ? {} : { limit: Number(limit) });
    return { jobs: await this.jobs.list(q.limit) };
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<JobRecord> {
    return rest(this.jobs.find(parseBody(JobGetSchema, { id }).id));
  }

  @Delete(':id')
  cancel(@Param('id') id: string): Promise<JobRecord> {
    return rest(this.jobs.cancel(parseBody(JobGetSchema, { id }).id));
  }
}

// REST: POST /jobs, GET /jobs, GET /jobs/:id, DELETE /jobs/:id (cancel). The same operations
// are on NATS (JOB_SUBJECTS.submit/get/list), served by JobsService.
import { Body, Controller, Delete, Get, HttpException, HttpStatus, Param, Post, Query } from '@nestjs/common';
import type { JobRecord } from '@cmesh/protocol';
import { JobRejectedError } from './job-errors';
import { JobsService } from './jobs.service';

async function http<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof JobRejectedError) throw new HttpException({ statusCode: e.status, error: e.message }, e.status);
    throw e;
  }
}

@Controller('jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  submit(@Body() body: unknown): Promise<JobRecord> {
    return http(this.jobs.submit(body));
  }

  @Get()
  async list(@Query('limit') limit?: string): Promise<{ jobs: JobRecord[] }> {
    return { jobs: await this.jobs.list(limit ? Number(limit) : 20) };
  }

  @Get(':id')
  async get(@Param('id') id: string): Promise<JobRecord> {
    const job = await this.jobs.get(id);
    if (!job) throw new HttpException({ statusCode: 404, error: `no job ${JSON.stringify(id)}` }, HttpStatus.NOT_FOUND);
    return job;
  }

  @Delete(':id')
  cancel(@Param('id') id: string): Promise<JobRecord> {
    return http(this.jobs.cancel(id));
  }
}

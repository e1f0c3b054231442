// REST: POST /jobs, GET /jobs, GET /jobs/:id, DELETE /jobs/:id (cancel). The same operations
// are on NATS (the cluster's jobs.submit/get/list), served by JobsService. Input is validated
// with the protocol's schemas (ApiInput) and errors have the shape of every other controller's
// (HttpErrorFilter).
import { Controller, Delete, Get, Headers, Post } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import {
  IDEMPOTENCY_KEY_HEADER,
  IdempotencyKeySchema,
  JobGet,
  JobGetSchema,
  JobList,
  JobListSchema,
  JobRecord,
  JobRecordSchema,
  JobRequest,
  JobRequestSchema,
} from '@cmesh/protocol';
import { z } from 'zod';
import { ReplyError } from '../nats/reply-error';
import { ApiInput } from '../http/api-input';
import { ApiZodBody, ApiZodResponse } from '../http/openapi';
import { JobsService } from './jobs.service';

/** The Idempotency-Key header as the request's key (the body may carry the same one, not another). */
function withHeaderKey(req: JobRequest, header?: string): JobRequest {
  if (header === undefined) return req;
  const key = IdempotencyKeySchema.safeParse(header);
  if (!key.success) throw new ReplyError('BAD_REQUEST', `${IDEMPOTENCY_KEY_HEADER}: ${key.error.issues[0]?.message ?? 'not valid'}`);
  if (req.idempotencyKey !== undefined && req.idempotencyKey !== key.data)
    throw new ReplyError('BAD_REQUEST', `${IDEMPOTENCY_KEY_HEADER} and the body's idempotencyKey differ`);
  return { ...req, idempotencyKey: key.data };
}

const JobIdParam = () => ApiInput(JobGetSchema, { params: { id: 'id' } });

@ApiTags('jobs')
@Controller('jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  @ApiOperation({ summary: 'submit a collective sweep to agents (by name, a group, or nranks idle ones); 409 when they are busy and onBusy is refuse' })
  @ApiZodBody(JobRequestSchema)
  @ApiZodResponse(JobRecordSchema, { status: 201, errors: [400, 404, 409, 422, 429] })
  @ApiHeader({
    name: IDEMPOTENCY_KEY_HEADER,
    required: false,
    description:
      'names this submission: a retry with the same key (and the same body) gets the same job, never a second run; the same key with another body is a 422',
  })
  submit(@ApiInput(JobRequestSchema) req: JobRequest, @Headers('idempotency-key') key?: string): Promise<JobRecord> {
    return this.jobs.submit(withHeaderKey(req, key));
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

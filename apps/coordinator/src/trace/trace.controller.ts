// REST for the live flight recorder: what every rank of a job is doing now, and who is stuck.
import { Controller, Get, UseFilters } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { GroupTraceQuerySchema, TraceQuerySchema, TraceReport, TraceReportSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiErrorFilter } from '../http/api-error.filter';
import { ApiInput } from '../http/api-input';
import { ApiZodResponse } from '../http/openapi';
import { ReplyError } from '../nats/reply-error';
import { TraceService } from './trace.service';

@ApiTags('trace')
@Controller()
@UseFilters(ApiErrorFilter)
export class TraceController {
  constructor(private readonly trace: TraceService) {}

  @Get('traces')
  @ApiOperation({ summary: "every answering rank's flight recorder, analysed per job and process group (which rank is stuck, and where)" })
  @ApiZodResponse(TraceReportSchema)
  all(@ApiInput(TraceQuerySchema, { query: { job: String, waitMs: Number } }) q: z.infer<typeof TraceQuerySchema>): Promise<TraceReport> {
    return this.trace.report({ job: q.job }, q.waitMs);
  }

  @Get('groups/:id/trace')
  @ApiOperation({ summary: "the process groups of one job (a cmesh run's rdzv id, a mesh job's id): each rank's last completed and current collective, and who is stuck" })
  @ApiZodResponse(TraceReportSchema, { errors: [400, 404] })
  async group(@ApiInput(GroupTraceQuerySchema, { params: { id: 'id' }, query: { waitMs: Number } }) q: z.infer<typeof GroupTraceQuerySchema>): Promise<TraceReport> {
    const r = await this.trace.report({ job: q.id }, q.waitMs);
    if (!r.answered) throw new ReplyError('NOT_FOUND', `no rank of ${JSON.stringify(q.id)} answered within ${r.waitedMs} ms`);
    return r;
  }
}

// REST for the live flight recorder: what every rank of a job is doing now, and who is stuck.
import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { GroupTraceQuerySchema, TraceQuerySchema, TraceReport, TraceReportSchema } from '@cmesh/protocol';
import { z } from 'zod';
import { ApiInput } from '../http/api-input';
import { ApiZodResponse } from '../http/openapi';
import { JobsService } from '../jobs/jobs.service';
import { ReplyError } from '../nats/reply-error';
import { TraceService } from './trace.service';

/** jobs looked at for a coordinator group's running ones */
const RECENT_JOBS = 200;

@ApiTags('trace')
@Controller()
export class TraceController {
  constructor(
    private readonly trace: TraceService,
    private readonly jobs: JobsService,
  ) {}

  @Get('traces')
  @ApiOperation({ summary: "every answering rank's flight recorder, analysed per job and process group (which rank is stuck, and where)" })
  @ApiZodResponse(TraceReportSchema)
  all(@ApiInput(TraceQuerySchema, { query: { job: String, waitMs: Number } }) q: z.infer<typeof TraceQuerySchema>): Promise<TraceReport> {
    return this.trace.report({ job: q.job }, q.waitMs);
  }

  @Get('groups/:id/trace')
  @ApiOperation({
    summary:
      "the process groups of one job (a cmesh run's rdzv id, a mesh job's id) or of the jobs running on a coordinator group: each rank's last completed and current collective, and who is stuck",
  })
  @ApiZodResponse(TraceReportSchema, { errors: [400, 404] })
  async group(
    @ApiInput(GroupTraceQuerySchema, { params: { id: 'id' }, query: { waitMs: Number } }) q: z.infer<typeof GroupTraceQuerySchema>,
  ): Promise<TraceReport> {
    let r = await this.trace.report({ job: q.id }, q.waitMs);
    if (!r.answered) {
      // a coordinator group (POST /groups): the ranks of the jobs running on it
      const running = (await this.jobs.list(RECENT_JOBS)).filter((j) => j.state === 'running' && j.request.group === q.id);
      const each = await Promise.all(running.map((j) => this.trace.report({ job: j.id }, q.waitMs)));
      if (each.length)
        r = { reports: each.flatMap((x) => x.reports), answered: each.reduce((a, x) => a + x.answered, 0), waitedMs: Math.max(...each.map((x) => x.waitedMs)) };
    }
    if (!r.answered) throw new ReplyError('NOT_FOUND', `no rank of ${JSON.stringify(q.id)} answered within ${r.waitedMs} ms`);
    return r;
  }
}

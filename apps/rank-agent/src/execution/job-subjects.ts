// The agent's NATS entry points for jobs: its own jobs.start.<agent id> (the coordinator sends a
// job's assignment, with the job's secret, to each member on its own subject, which only this
// agent's login may read) and the broadcast jobs.cancel. Bodies are validated by the
// InboundTransport; a malformed one is counted, logged and dropped, and changes nothing. The
// transport subscribes before the agent registers, so no assignment can come before it listens.
import { Controller, UseFilters } from '@nestjs/common';
import { EventPattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { JobAssignment, JobAssignmentSchema, JobCancel, JobCancelSchema } from '@cmesh/protocol';
import { JobExecutionService } from './job-execution.service';

@Controller()
@UseFilters(InboundErrors)
export class JobSubjects {
  constructor(private readonly jobs: JobExecutionService) {}

  @EventPattern('jobs.start', { schema: JobAssignmentSchema })
  start(a: JobAssignment): Promise<void> {
    return this.jobs.assign(a);
  }

  @EventPattern('jobs.cancel', { schema: JobCancelSchema })
  cancel(c: JobCancel): Promise<void> {
    return this.jobs.cancel(c);
  }
}

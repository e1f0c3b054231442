// The agent's NATS entry points for jobs (broadcast subjects; members find themselves in the
// assignment). Malformed messages are logged and dropped: they change nothing.
import { Controller, Logger } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { JOB_SUBJECTS, JobAssignmentSchema, JobCancelSchema } from '@cmesh/protocol';
import { JobRunnerService } from './job-runner.service';

@Controller()
export class JobsController {
  private readonly log = new Logger('JobsController');

  constructor(private readonly runner: JobRunnerService) {}

  @EventPattern(JOB_SUBJECTS.start)
  async start(@Payload() body: unknown): Promise<void> {
    const a = JobAssignmentSchema.safeParse(body);
    if (!a.success) return void this.log.warn(`ignored malformed job assignment: ${a.error.issues[0]?.message}`);
    await this.runner.assign(a.data);
  }

  @EventPattern(JOB_SUBJECTS.cancel)
  async cancel(@Payload() body: unknown): Promise<void> {
    const c = JobCancelSchema.safeParse(body);
    if (!c.success) return void this.log.warn(`ignored malformed job cancel: ${c.error.issues[0]?.message}`);
    await this.runner.cancel(c.data);
  }
}

// The agent's NATS entry points for jobs: the broadcast subjects cmesh.jobs.start and
// cmesh.jobs.cancel (members find themselves in the assignment). Bodies are validated by
// InboundMessages; a malformed one is counted, logged and dropped, and changes nothing.
import { Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from 'nats';
import { JOB_SUBJECTS, JobAssignmentSchema, JobCancelSchema } from '@cmesh/protocol';
import { InboundMessages } from '../nats/inbound-messages';
import { JobRunnerService } from './job-runner.service';

@Injectable()
export class JobSubjects implements OnApplicationBootstrap, OnApplicationShutdown {
  private subs: Subscription[] = [];

  constructor(
    private readonly inbound: InboundMessages,
    private readonly runner: JobRunnerService,
  ) {}

  /** Subscribed before the agent registers, so no assignment can come before it listens. */
  async onApplicationBootstrap(): Promise<void> {
    this.subs = [
      await this.inbound.listen(JOB_SUBJECTS.start, JobAssignmentSchema, (a) => this.runner.assign(a)),
      await this.inbound.listen(JOB_SUBJECTS.cancel, JobCancelSchema, (c) => this.runner.cancel(c)),
    ];
  }

  onApplicationShutdown(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

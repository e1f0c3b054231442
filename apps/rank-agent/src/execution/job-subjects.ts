// The agent's NATS entry points for jobs: the cluster's broadcast subjects jobs.start and
// jobs.cancel (members find themselves in the assignment). Bodies are validated by
// InboundMessages; a malformed one is counted, logged and dropped, and changes nothing.
import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from 'nats';
import { JobAssignmentSchema, JobCancelSchema, clusterNames } from '@cmesh/protocol';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { InboundMessages } from '../nats/inbound-messages';
import { JobRunnerService } from './job-runner.service';

@Injectable()
export class JobSubjects implements OnApplicationBootstrap, OnApplicationShutdown {
  private subs: Subscription[] = [];

  constructor(
    private readonly inbound: InboundMessages,
    private readonly runner: JobRunnerService,
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
  ) {}

  /** Subscribed before the agent registers, so no assignment can come before it listens. */
  async onApplicationBootstrap(): Promise<void> {
    const JOB_SUBJECTS = clusterNames(this.config.cluster).jobs;
    this.subs = [
      await this.inbound.listen(JOB_SUBJECTS.start, JobAssignmentSchema, (a) => this.runner.assign(a)),
      await this.inbound.listen(JOB_SUBJECTS.cancel, JobCancelSchema, (c) => this.runner.cancel(c)),
    ];
  }

  onApplicationShutdown(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

// GET /health: who this agent is, whether NATS is up, its backends, what it is running and the
// process groups it was told it belongs to.
import { Controller, Get, Inject } from '@nestjs/common';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { JobExecutionService } from '../execution/job-execution.service';
import { JobRunner } from '../execution/job-runner';
import { JOB_RUNNERS } from '../execution/tokens';
import { GroupMembership } from '../registration/group-membership';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    @Inject(JOB_RUNNERS) private readonly runners: Record<string, JobRunner>,
    private readonly jobs: JobExecutionService,
    private readonly membership: GroupMembership,
  ) {}

  @Get()
  health() {
    return {
      status: 'ok',
      agentId: this.config.agentId,
      name: this.config.name,
      pid: process.pid,
      backends: Object.fromEntries(Object.entries(this.runners).map(([k, r]) => [k, r.available()])),
      ...this.jobs.state(),
      groups: this.membership.list(),
    };
  }
}

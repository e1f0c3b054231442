// GET /health: who this agent is, whether NATS is up, its backends, what it is running and the
// process groups it was told it belongs to.
import { Controller, Get, Inject } from '@nestjs/common';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { JobBackend } from '../execution/job-backend';
import { JobRunnerService } from '../execution/job-runner.service';
import { JOB_BACKENDS } from '../execution/tokens';
import { GroupMembership } from '../registration/group-membership';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(AGENT_CONFIG) private readonly config: AgentConfig,
    @Inject(JOB_BACKENDS) private readonly backends: Record<string, JobBackend>,
    private readonly runner: JobRunnerService,
    private readonly membership: GroupMembership,
  ) {}

  @Get()
  health() {
    return {
      status: 'ok',
      agentId: this.config.agentId,
      name: this.config.name,
      pid: process.pid,
      backends: Object.fromEntries(Object.entries(this.backends).map(([k, b]) => [k, b.available()])),
      ...this.runner.state(),
      groups: this.membership.list(),
    };
  }
}

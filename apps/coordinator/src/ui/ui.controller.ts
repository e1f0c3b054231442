// GET /ui: the live page (ui-page.ts) from the services the REST routes use, behind the same
// authentication as they are (a read token suffices); a browser gets in through the login link
// (ui-login.controller.ts), whose session cookie reads like the read token.
import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiExcludeEndpoint } from '@nestjs/swagger';
import { AgentsService } from '../agents/agents.service';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { GroupsService } from '../groups/groups.service';
import { JobsService } from '../jobs/jobs.service';
import { ScansService } from '../scans/scans.service';
import { ServiceGroupsView } from '../service-groups/service-groups.view';
import { TraceService } from '../trace/trace.service';
import { renderUi } from './ui-page';

/** recent jobs shown with their tables */
const JOBS_SHOWN = 8;
/** how long the page waits for ranks' flight recorders */
const TRACE_WAIT_MS = 300;

@Controller('ui')
export class UiController {
  constructor(
    private readonly agents: AgentsService,
    private readonly groups: GroupsService,
    private readonly jobs: JobsService,
    private readonly scans: ScansService,
    private readonly trace: TraceService,
    private readonly serviceGroups: ServiceGroupsView,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  @Get()
  @ApiExcludeEndpoint()
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('cache-control', 'no-store')
  async page(): Promise<string> {
    const [agents, groups, serviceGroups, jobs, scans, traces] = await Promise.all([
      this.agents.list(),
      this.groups.list(),
      this.serviceGroups.list(),
      this.jobs.list(JOBS_SHOWN),
      this.scans.list(1),
      // the flight recorders of running ranks; the page does not wait long for them
      this.trace.report({}, TRACE_WAIT_MS).catch(() => null),
    ]);
    return renderUi({
      cluster: this.config.cluster,
      replica: this.config.replicaId,
      agents,
      groups,
      serviceGroups,
      jobs,
      scan: scans[0] ?? null,
      traces,
      now: new Date(),
    });
  }
}

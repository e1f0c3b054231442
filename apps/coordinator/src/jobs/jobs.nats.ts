// NATS for jobs: the cluster's jobs.submit/get/list (one replica answers each) and every member's
// events (jobs.events.<job>.<agent>, seen by every replica; the one running the job acts on it).
// An event counts only on its sender's own subject: the agent's login is the only one that may
// publish there, so no login can report for another agent or another job.
import { Controller, Inject, UseFilters } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { InboundContext, InboundErrors } from '@cmesh/protocol/nest';
import { ClusterNames, JobEvent, JobEventSchema, JobGet, JobGetSchema, JobList, JobListSchema, JobRequest, JobRequestSchema } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';
import { JobsService } from './jobs.service';
import { JOBS_NATS, JOB_CLUSTER } from './tokens';
import { natsPrincipal } from '../idempotency/principal';
import { NatsConnection } from '@nats-io/nats-core';

@Controller()
@UseFilters(InboundErrors)
export class JobsNats {
  constructor(
    private readonly jobs: JobsService,
    @Inject(JOB_CLUSTER) private readonly names: ClusterNames,
    @Inject(JOBS_NATS) private readonly nc: NatsConnection,
  ) {}

  @MessagePattern('jobs.submit', { schema: JobRequestSchema })
  async submit(@Payload() req: JobRequest, @Ctx() ctx: InboundContext) {
    // with authentication on, the server tells clients so (auth_required) as it tells the coordinator
    return { ok: true, job: await this.jobs.submit(req, natsPrincipal(ctx.reply, !!this.nc.info?.auth_required)) };
  }

  @MessagePattern('jobs.get', { schema: JobGetSchema })
  async get({ id }: JobGet) {
    return { ok: true, job: await this.jobs.find(id) };
  }

  @MessagePattern('jobs.list', { schema: JobListSchema })
  async list({ limit }: JobList) {
    return { ok: true, jobs: await this.jobs.list(limit) };
  }

  @EventPattern('jobs.eventsWildcard', { schema: JobEventSchema })
  event(@Payload() ev: JobEvent, @Ctx() ctx: InboundContext): void {
    const own = this.names.jobs.events(ev.jobId, ev.agentId);
    if (ctx.subject !== own)
      throw new ReplyError('FORBIDDEN', `an event of agent ${JSON.stringify(ev.agentId)} for job ${ev.jobId} came on ${ctx.subject}, not its own subject`);
    this.jobs.onEvent(ev);
  }
}

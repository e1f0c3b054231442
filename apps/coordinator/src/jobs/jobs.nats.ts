// NATS for jobs: the cluster's jobs.submit/get/list (one replica answers each) and every member's
// events (jobs.events.*, seen by every replica; the one running the job acts on it).
import { Controller, UseFilters } from '@nestjs/common';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { InboundErrors } from '@cmesh/protocol/nest';
import { JobEvent, JobEventSchema, JobGet, JobGetSchema, JobList, JobListSchema, JobRequest, JobRequestSchema } from '@cmesh/protocol';
import { JobsService } from './jobs.service';

@Controller()
@UseFilters(InboundErrors)
export class JobsNats {
  constructor(private readonly jobs: JobsService) {}

  @MessagePattern('jobs.submit', { schema: JobRequestSchema })
  async submit(req: JobRequest) {
    return { ok: true, job: await this.jobs.submit(req) };
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
  event(ev: JobEvent): void {
    this.jobs.onEvent(ev);
  }
}

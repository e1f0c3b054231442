// /health (terminus): up while NATS is connected and the KV bucket answers.
import { Controller, Get, Inject } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { NatsConnection } from '@nats-io/nats-core';
import { LeaderService } from '../leader/leader.service';
import { NATS_CONNECTION } from '../nats/nats.module';
import { KvState } from '../state/kv-state';
import { Public } from '../http/api-auth.guard';

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicator: HealthIndicatorService,
    private readonly state: KvState,
    private readonly leader: LeaderService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      async () => {
        const i = this.indicator.check('nats');
        if (this.nc.isClosed()) return i.down({ reason: 'connection closed' });
        try {
          await this.state.kv.status();
          return i.up({ server: this.nc.getServer(), leader: this.leader.isLeader });
        } catch (e) {
          return i.down({ reason: (e as Error).message });
        }
      },
    ]);
  }
}

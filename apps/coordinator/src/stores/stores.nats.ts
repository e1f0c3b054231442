// NATS for store buckets: <cluster>.stores.open (one coordinator replica answers each).
import { Controller, Inject, UseFilters } from '@nestjs/common';
import { MessagePattern } from '@nestjs/microservices';
import { NatsConnection } from '@nats-io/nats-core';
import { InboundErrors } from '@cmesh/protocol/nest';
import { ClusterNames, StoreOpen, StoreOpenReply, StoreOpenSchema } from '@cmesh/protocol';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { openStoreBucket, StoreLimits } from './store-buckets';

export const STORE_LIMITS = Symbol('STORE_LIMITS');

@Controller()
@UseFilters(InboundErrors)
export class StoresNats {
  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
    @Inject(STORE_LIMITS) private readonly limits: StoreLimits,
  ) {}

  @MessagePattern('stores.open', { schema: StoreOpenSchema })
  async open({ bucket }: StoreOpen): Promise<StoreOpenReply> {
    return { ok: true, bucket, created: await openStoreBucket(this.nc, this.names, bucket, this.limits) };
  }
}

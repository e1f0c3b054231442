// One NATS connection (its subscriptions are InboundTransport's, see nats-transport.ts), the decoder
// for inbound messages and the cluster's KV state bucket, for the whole coordinator.
import { Global, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { Kvm } from '@nats-io/kv';
import { ClusterNames } from '@cmesh/protocol';
import { CLUSTER_NAMES, COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { KvState } from '../state/kv-state';
import { stateRecordSchema } from '../state/kv-records';
import { InboundMessages } from './inbound-messages';
import { NATS_CONNECTION } from './nats-connection';
import { natsLogin } from '@cmesh/collectives';

export { NATS_CONNECTION };

@Injectable()
class NatsCloser implements OnApplicationShutdown {
  constructor(@Inject(NATS_CONNECTION) private readonly nc: NatsConnection) {}
  async onApplicationShutdown(): Promise<void> {
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }
}

@Global()
@Module({
  providers: [
    {
      provide: NATS_CONNECTION,
      inject: [COORDINATOR_CONFIG],
      useFactory: (c: CoordinatorConfig) => connect({ ...natsLogin(), servers: c.natsUrl, name: `cmesh-coordinator-${c.replicaId}`, timeout: 5000, maxReconnectAttempts: -1 }),
    },
    {
      provide: KvState,
      inject: [NATS_CONNECTION, CLUSTER_NAMES, InboundMessages],
      useFactory: async (nc: NatsConnection, names: ClusterNames, inbound: InboundMessages) =>
        new KvState(await new Kvm(nc).create(names.buckets.state, { history: 1 }), inbound.records(names.buckets.state), stateRecordSchema),
    },
    InboundMessages,
    NatsCloser,
  ],
  exports: [NATS_CONNECTION, KvState, InboundMessages],
})
export class NatsModule {}

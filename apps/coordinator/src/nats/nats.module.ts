// One NATS connection (its subscriptions are InboundTransport's, see nats-transport.ts), the decoder
// for inbound messages and the cluster's KV state bucket, for the whole coordinator.
import { Global, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { ClusterNames } from '@cmesh/protocol';
import { CLUSTER_NAMES, COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { KvState } from '../state/kv-state';
import { stateRecordSchema } from '../state/kv-records';
import { InboundMessages } from './inbound-messages';
import { NATS_CONNECTION } from './nats-connection';
import { BucketReplicasCheck } from './bucket-replicas-check';
import { configureBucketReplicas } from './bucket-replicas';
import { NATS_RECONNECT, drainWithin, natsLogin, natsServers, watchConnection } from '@cmesh/collectives/nats';

export { NATS_CONNECTION };

@Injectable()
class NatsCloser implements OnApplicationShutdown {
  constructor(@Inject(NATS_CONNECTION) private readonly nc: NatsConnection) {}
  async onApplicationShutdown(): Promise<void> {
    await drainWithin(this.nc);
  }
}

@Global()
@Module({
  providers: [
    {
      provide: NATS_CONNECTION,
      inject: [COORDINATOR_CONFIG],
      useFactory: async (c: CoordinatorConfig) => {
        configureBucketReplicas(c.natsReplicas);
        // reconnects for as long as it lives; the connection is watched from its start (watchConnection)
        const nc = await connect({
          ...natsLogin(),
          ...NATS_RECONNECT,
          servers: natsServers(c.natsUrl),
          name: `cmesh-coordinator-${c.replicaId}`,
          timeout: 5000,
        });
        watchConnection(nc);
        return nc;
      },
    },
    {
      provide: KvState,
      inject: [NATS_CONNECTION, CLUSTER_NAMES, InboundMessages],
      useFactory: (nc: NatsConnection, names: ClusterNames, inbound: InboundMessages) =>
        KvState.open(nc, names.buckets.state, { history: 1 }, inbound.records(names.buckets.state), stateRecordSchema),
    },
    InboundMessages,
    NatsCloser,
    BucketReplicasCheck,
  ],
  exports: [NATS_CONNECTION, KvState, InboundMessages],
})
export class NatsModule {}

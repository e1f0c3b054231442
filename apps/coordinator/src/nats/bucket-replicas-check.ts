// On start, every replica compares the cluster's buckets with the wanted replica count and says
// what it found (bucket-replicas.ts); it never holds the start up: a failed check is logged.
// Every REPLICA_CHECK_MS it checks again and says only what it raised or could not.
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { NatsConnection } from '@nats-io/nats-core';
import { ClusterNames } from '@cmesh/protocol';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from './nats-connection';
import { REPLICA_CHECK_MS, checkBucketReplicas, describeReplicaCheck } from './bucket-replicas';

@Injectable()
export class BucketReplicasCheck implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('NatsReplicas');
  private timer: NodeJS.Timeout | null = null;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {}

  onApplicationBootstrap(): void {
    this.check(true);
    this.timer = setInterval(() => this.check(false), REPLICA_CHECK_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** In the background: raising a big bucket's replicas takes as long as copying it. */
  private check(first: boolean): void {
    void checkBucketReplicas(this.nc, this.names).then(
      (c) => {
        const { info, warn } = describeReplicaCheck(c);
        // later checks: only what was raised or could not be
        for (const l of first ? info : info.slice(1)) this.log.log(l);
        for (const l of first ? warn : warn.filter((w) => !w.includes('kept above'))) this.log.warn(l);
      },
      (e: Error) => this.log.warn(`NATS replicas: cannot check the buckets: ${e.message}`),
    );
  }
}

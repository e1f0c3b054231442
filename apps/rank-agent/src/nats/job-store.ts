// The coordinator's store for one job (the same JetStream KV bucket the job's nats:// init
// method uses), opened on the agent's own connection for the nccl backend's unique-id exchange.
import { NatsKvStore, Store, jobBucket } from '@cmesh/collectives';
import type { NatsConnection } from '@nats-io/nats-core';

export function openJobStore(nc: NatsConnection, prefix: string, timeoutMs = 60_000): Promise<Store> {
  return NatsKvStore.open({ connection: nc, bucket: jobBucket(prefix), timeoutMs });
}

// Which coordinator replicas are alive, in JetStream KV (the cluster's replicas bucket, one
// key per replica, renewed like agent claims): a replica that stops renewing has died, and the
// jobs it had queued (kept in its memory) are failed by another replica instead of staying queued.
import { NatsConnection } from '@nats-io/nats-core';
import { z } from 'zod';
import { KvState } from '../state/kv-state';
import { RecordCheck } from '../state/kv-records';
import { CLAIM_STALE_MS, isStale } from './agent-claims';

const LeaseSchema = z.object({ renewedAt: z.number() });

export class ReplicaLeases {
  private state: KvState | null = null;

  constructor(
    private readonly nc: NatsConnection,
    /** the cluster's replicas bucket (ClusterNames.buckets.replicas) */
    private readonly bucket: string,
    /** this replica (CoordinatorConfig.replicaId in the coordinator) */
    readonly replica: string,
    /** a lease read back that is not valid is skipped (its replica counts as not alive) */
    private readonly check: RecordCheck = new RecordCheck(bucket),
    /** a lease not renewed for this long is stale (the claims' staleMs) */
    private readonly staleMs = CLAIM_STALE_MS,
  ) {}

  async open(): Promise<void> {
    this.state = await KvState.open(this.nc, this.bucket, { history: 1 }, this.check, () => LeaseSchema);
    await this.renew();
  }

  async renew(): Promise<void> {
    await this.state?.put(this.replica, { renewedAt: Date.now() });
  }

  /** False once the replica has not renewed for staleMs (or said goodbye). */
  async alive(replica: string): Promise<boolean> {
    const lease = await this.state?.get<{ renewedAt: number }>(replica);
    return !!lease && !isStale(lease.renewedAt, this.staleMs);
  }

  async release(): Promise<void> {
    // on shutdown, best effort: a lease not deleted goes stale all the same
    await this.state?.delete(this.replica).catch(() => undefined);
  }
}

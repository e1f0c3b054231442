// Which coordinator replicas are alive, in JetStream KV (bucket `cmesh_coordinator_replicas`, one
// key per replica, renewed like agent claims): a replica that stops renewing has died, and the
// jobs it had queued (kept in its memory) are failed by another replica instead of staying queued.
import { JSONCodec, KV, NatsConnection } from 'nats';
import { isStale } from './agent-claims';

export const REPLICAS_BUCKET = 'cmesh_coordinator_replicas';

const json = JSONCodec<{ renewedAt: number }>();

export class ReplicaLeases {
  private kv: KV | null = null;

  constructor(
    private readonly nc: NatsConnection,
    readonly replica: string,
  ) {}

  async open(): Promise<void> {
    this.kv = await this.nc.jetstream().views.kv(REPLICAS_BUCKET, { history: 1 });
    await this.renew();
  }

  async renew(): Promise<void> {
    await this.kv?.put(this.replica, json.encode({ renewedAt: Date.now() }));
  }

  /** False once the replica has not renewed for CLAIM_STALE_MS (or said goodbye). */
  async alive(replica: string): Promise<boolean> {
    const e = await this.kv?.get(replica);
    if (!e || e.operation !== 'PUT' || !e.value.length) return false;
    return !isStale(json.decode(e.value).renewedAt);
  }

  async release(): Promise<void> {
    await this.kv?.delete(this.replica).catch(() => undefined);
  }
}

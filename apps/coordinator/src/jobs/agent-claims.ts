// Which job holds which agent, in JetStream KV (the cluster's claims bucket, one key per agent),
// shared by every coordinator replica: a claim is created with compare-and-set, so two replicas
// never put two jobs on one agent. The replica running a job renews its claims; a claim not
// renewed for `staleMs` (CLAIM_STALE_MS unless the coordinator's claimStaleMs says otherwise)
// belongs to a replica that stopped, and may be taken over.
import { NatsConnection } from '@nats-io/nats-core';
import { KV } from '@nats-io/kv';
import { createKv } from '../nats/bucket-replicas';
import { z } from 'zod';
import { KvStream } from '../state/kv-keys';
import { RecordCheck } from '../state/kv-records';

/** Default of the coordinator's claimStaleMs (CMESH_CLAIM_STALE_MS). */
export const CLAIM_STALE_MS = 10_000;

/** How often claims and leases are renewed: five times within the time they go stale in. */
export function claimRenewMs(staleMs: number): number {
  return Math.max(50, Math.floor(staleMs / 5));
}

export interface Claim {
  jobId: string;
  replica: string;
  renewedAt: number;
}

const ClaimSchema = z.object({ jobId: z.string(), replica: z.string(), renewedAt: z.number() });

export class AgentClaims {
  private kv: KV | null = null;
  private stream: KvStream | null = null;

  constructor(
    private readonly nc: NatsConnection,
    /** the cluster's claims bucket (ClusterNames.buckets.claims) */
    private readonly bucket: string,
    /** this replica: claims it made are renewed and released by it */
    readonly replica: string,
    /** a claim read back that is not valid is skipped (as none: a new claim replaces it) */
    private readonly check: RecordCheck = new RecordCheck(bucket),
    /** a claim not renewed for this long is stale */
    readonly staleMs = CLAIM_STALE_MS,
  ) {}

  async open(): Promise<void> {
    this.kv = await createKv(this.nc, this.bucket, { history: 1 });
    this.stream = await KvStream.of(this.nc, this.bucket);
  }

  private get store(): KV {
    return this.kv ?? this.notOpen();
  }

  private notOpen(): never {
    throw new Error('agent claims are not open');
  }

  /** The claim on an agent with its KV revision, live or stale (null when none). */
  private async read(agentId: string): Promise<{ claim: Claim; revision: number } | null> {
    const e = await this.store.get(agentId);
    const claim = e && e.operation === 'PUT' && e.value.length ? this.check.decode(agentId, e.value, ClaimSchema) : undefined;
    return claim && e ? { claim, revision: e.revision } : null;
  }

  /** The live claim on an agent (null when none, or stale). */
  async holder(agentId: string): Promise<Claim | null> {
    const r = await this.read(agentId);
    return r && !isStale(r.claim.renewedAt, this.staleMs) ? r.claim : null;
  }

  /**
   * Claims every agent for the job, or none: on the first agent held by another live job, the
   * claims made so far are released and that holder is returned. Stale claims are taken over
   * (reported in `takenOver`, so the caller can close the orphaned jobs).
   */
  async claimAll(agentIds: string[], jobId: string): Promise<{ ok: true; takenOver: Claim[] } | { ok: false; agentId: string; holder: Claim }> {
    const mine: string[] = [];
    const takenOver: Claim[] = [];
    const value = () => JSON.stringify({ jobId, replica: this.replica, renewedAt: Date.now() });
    for (const agentId of agentIds) {
      const taken = await this.take(agentId, jobId, value);
      if (taken.ok) {
        mine.push(agentId);
        if (taken.stale) takenOver.push(taken.stale);
        continue;
      }
      await this.release(mine, jobId);
      return { ok: false, agentId, holder: taken.holder };
    }
    return { ok: true, takenOver };
  }

  private async take(agentId: string, jobId: string, value: () => string): Promise<{ ok: true; stale?: Claim } | { ok: false; holder: Claim }> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const e = await this.store.get(agentId);
      const c = e && e.operation === 'PUT' && e.value.length ? this.check.decode(agentId, e.value, ClaimSchema) : undefined;
      if (!c || !e) {
        // absent, deleted or not a valid claim: create (or update at the revision read), failing if someone was quicker
        if (await succeeds(e ? this.store.update(agentId, value(), e.revision) : this.store.create(agentId, value()))) return { ok: true };
        continue;
      }
      if (c.jobId === jobId) return { ok: true };
      if (!isStale(c.renewedAt, this.staleMs)) return { ok: false, holder: c };
      if (await succeeds(this.store.update(agentId, value(), e.revision))) return { ok: true, stale: c };
    }
    const h = await this.holder(agentId);
    return { ok: false, holder: h ?? { jobId: '?', replica: '?', renewedAt: 0 } };
  }

  /** Refreshes this job's claims (a replica that stops renewing loses them once they are stale). */
  async renew(agentIds: string[], jobId: string): Promise<void> {
    await this.eachOwn(agentIds, jobId, (agentId, revision) =>
      this.store.update(agentId, JSON.stringify({ jobId, replica: this.replica, renewedAt: Date.now() }), revision),
    );
  }

  /** Drops this job's claims (leaves other jobs' claims alone). */
  async release(agentIds: string[], jobId: string): Promise<void> {
    await this.eachOwn(agentIds, jobId, (agentId, revision) => this.store.delete(agentId, { previousSeq: revision }));
  }

  /** Removes the claims nobody renewed in time (their replica died) and returns them. */
  async sweepStale(): Promise<Claim[]> {
    const out: Claim[] = [];
    for (const agentId of await (this.stream ?? this.notOpen()).keys()) {
      const r = await this.read(agentId);
      if (!r || !isStale(r.claim.renewedAt, this.staleMs)) continue;
      // compare-and-delete: a replica that just took the agent over keeps it
      if (await succeeds(this.store.delete(agentId, { previousSeq: r.revision }))) out.push(r.claim);
    }
    return out;
  }

  /**
   * Applies a compare-and-set write to each of these agents that this job still holds. A write
   * that loses to another write of the same job (a renewal racing the release at the job's end)
   * is read and tried again: otherwise the agent would stay held until the claim went stale.
   */
  private async eachOwn(agentIds: string[], jobId: string, write: (agentId: string, revision: number) => Promise<unknown>): Promise<void> {
    for (const agentId of agentIds) {
      for (let attempt = 0; attempt < 5; attempt++) {
        const r = await this.read(agentId);
        if (r?.claim.jobId !== jobId || (await succeeds(write(agentId, r.revision)))) break;
      }
    }
  }
}

/** A claim or lease not renewed for `staleMs`: its replica stopped. */
export function isStale(renewedAt: number, staleMs: number): boolean {
  return Date.now() - renewedAt > staleMs;
}

/** Whether a compare-and-set KV write went through (false when another writer was first). */
function succeeds(write: Promise<unknown>): Promise<boolean> {
  return write.then(
    () => true,
    () => false,
  );
}

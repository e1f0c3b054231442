// Idempotency keys (@cmesh/protocol's idempotency.ts) in JetStream KV: the cluster's idempotency
// bucket, one entry per (operation, caller's login, key), kept IDEMPOTENCY_TTL_MS. Every replica
// reads the same bucket, so a retry sent to another replica finds the first one's entry. The entry
// is written before the request acts (before a job is dispatched, before a member joins), so a
// replica killed between acting and answering still leaves the entry its caller's retry finds.
import { createHash } from 'crypto';
import { NatsConnection } from '@nats-io/nats-core';
import { KV } from '@nats-io/kv';
import { createKv } from '../nats/bucket-replicas';
import { IDEMPOTENCY_TTL_MS } from '@cmesh/protocol';
import { z } from 'zod';
import { ReplyError } from '../nats/reply-error';
import { setTimeout as sleep } from 'timers/promises';

const EntrySchema = z.object({
  /** requestFingerprint of the first request */
  fp: z.string(),
  /** what the first request acts on: the job id, the joining member */
  ref: z.string(),
  /** the replica process (id and start) acting on it */
  owner: z.string(),
  at: z.number(),
  /** the first request's answer, once there is one worth repeating as is */
  result: z.unknown().optional(),
});
export type KeyEntry = z.infer<typeof EntrySchema>;

/** first: this request is the key's first and must act; again: an earlier one with the same key did (or is doing) it. */
export type Begin = { kind: 'first'; entry: KeyEntry } | { kind: 'again'; entry: KeyEntry; revision: number };

/**
 * How long begin() tries to write or read the entry before the request is refused as UNAVAILABLE:
 * about one JetStream leader election (4-9 s), and well inside a client's answer timeout. Each
 * KV call may take its own timeout past it.
 */
const BEGIN_DEADLINE_MS = 8000;

export class IdempotencyKeys {
  private kv: KV | null = null;

  constructor(
    private readonly nc: NatsConnection,
    /** the cluster's idempotency bucket (ClusterNames.buckets.idempotency) */
    private readonly bucket: string,
    /** this replica process: its id and a nonce of this start (a restarted replica keeps its id) */
    readonly owner: string,
    private readonly ttlMs = IDEMPOTENCY_TTL_MS,
  ) {}

  async open(): Promise<void> {
    this.kv = await createKv(this.nc, this.bucket, { history: 1, ttl: this.ttlMs });
  }

  /**
   * The entry's KV key: a hash of the caller's login and its key, so any key is a valid KV key and
   * the same key sent by another login is another entry (no login reads another's job by its key).
   */
  static slot(op: 'job' | 'join', principal: string, key: string): string {
    return `${op}.${createHash('sha256').update(`${principal}\n${key}`).digest('hex').slice(0, 48)}`;
  }

  private get store(): KV {
    if (!this.kv) throw new ReplyError('UNAVAILABLE', 'idempotency keys are not open yet');
    return this.kv;
  }

  /**
   * Records the key for a request of fingerprint `fp` acting on `ref`, or finds the entry an earlier
   * request left: the same request again (`again`), or another one (IDEMPOTENCY_KEY_REUSED).
   */
  async begin(slot: string, fp: string, ref: string, what: string): Promise<Begin> {
    const mine: KeyEntry = { fp, ref, owner: this.owner, at: Date.now() };
    let last = '';
    const end = Date.now() + BEGIN_DEADLINE_MS;
    for (let i = 0; Date.now() < end; i++) {
      try {
        await this.store.create(slot, JSON.stringify(mine));
        return { kind: 'first', entry: mine };
      } catch (e) {
        last = (e as Error).message;
      }
      // taken, or the write's answer was lost (a leader change): the entry says which
      if (Date.now() >= end) break;
      const e = await this.store.get(slot).catch((x: Error) => ((last = x.message), undefined));
      const entry = e && e.operation === 'PUT' ? EntrySchema.safeParse(safeJson(e.string())) : undefined;
      if (e && entry?.success) {
        const prev = entry.data;
        if (prev.owner === mine.owner && prev.ref === ref && prev.at === mine.at) return { kind: 'first', entry: mine };
        if (prev.fp !== fp)
          throw new ReplyError(
            'IDEMPOTENCY_KEY_REUSED',
            `${what}: this Idempotency-Key was used at ${new Date(prev.at).toISOString()} with another request; a retry must send the same request, a new request a new key`,
          );
        return { kind: 'again', entry: prev, revision: e.revision };
      }
      // an entry that is not valid is replaced; none yet: the write failed, try again
      if (e && e.operation === 'PUT' && (await this.replace(slot, mine, e.revision))) return { kind: 'first', entry: mine };
      await sleep(Math.min(100 * 2 ** i, 1000, Math.max(0, end - Date.now())));
    }
    throw new ReplyError('UNAVAILABLE', `${what}: cannot record the idempotency key (${last}); retry with the same key`);
  }

  /** Makes this replica the entry's owner (the first owner died before acting): false when another retry was first. */
  async takeOver(slot: string, entry: KeyEntry, revision: number): Promise<boolean> {
    return this.replace(slot, { ...entry, owner: this.owner, at: Date.now() }, revision);
  }

  /** Keeps the first request's answer, repeated to every retry. */
  async settle(slot: string, entry: KeyEntry, result: unknown): Promise<void> {
    await this.store.put(slot, JSON.stringify({ ...entry, result }));
  }

  /** Forgets a key whose request was refused before it acted: a retry may try again. */
  async forget(slot: string): Promise<void> {
    await this.store.delete(slot).catch(() => undefined); // the entry then only blocks retries for its TTL
  }

  /** The entry now, or undefined. */
  async read(slot: string): Promise<KeyEntry | undefined> {
    const e = await this.store.get(slot);
    const entry = e && e.operation === 'PUT' ? EntrySchema.safeParse(safeJson(e.string())) : undefined;
    return entry?.success ? entry.data : undefined;
  }

  private async replace(slot: string, entry: KeyEntry, revision: number): Promise<boolean> {
    try {
      await this.store.update(slot, JSON.stringify(entry), revision);
      return true;
    } catch {
      return false;
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

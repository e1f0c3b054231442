// Records read back from the coordinator's KV buckets are checked like inbound messages: a value
// that is not JSON or does not fit its kind's schema (a corrupted store, or bytes someone with
// rights on the bucket wrote) is skipped as if absent, counted in cmesh_rejected_messages_total
// (subject `kv:<bucket>`) and logged at most once per interval, never thrown: a bad record must
// not crash a request, end a watch loop or keep the coordinator from serving the rest.
import { Logger } from '@nestjs/common';
import { z } from 'zod';
import { AgentRecordSchema, GroupRecordSchema, KV_KEYS, RdzvRecordSchema, RejectReason, ServiceGroupRoundSchema, decodeMessage } from '@cmesh/protocol';
import { RateLimitedLog } from '@cmesh/protocol/kit';

/** Where rejected records are counted and logged (InboundMessages.records gives one that counts). */
export interface RecordSink {
  count(subject: string, reason: RejectReason): void;
  warn(line: string): void;
}

/** Records are the coordinator's own: far below a message's limit, but a job's can be large. */
const MAX_RECORD_BYTES = 8 * 1024 * 1024;
const LOG_INTERVAL_MS = 10_000;

export class RecordCheck {
  private readonly log: RateLimitedLog;

  constructor(
    readonly bucket: string,
    private readonly sink: RecordSink = defaultSink(),
  ) {
    this.log = new RateLimitedLog((line) => this.sink.warn(line), LOG_INTERVAL_MS);
  }

  /**
   * The record as stored (every field kept, as written) when it is JSON and fits `schema`;
   * undefined, counted and logged otherwise.
   */
  decode<S extends z.ZodTypeAny>(key: string, value: Uint8Array, schema: S): z.infer<S> | undefined {
    const d = decodeMessage(z.unknown(), value, { maxBytes: MAX_RECORD_BYTES });
    if (!d.ok) return this.reject(key, d.reason, d.message);
    let fits: boolean;
    let issues = '';
    try {
      const r = schema.safeParse(d.value);
      fits = r.success;
      if (!r.success)
        issues = r.error.issues
          .slice(0, 3)
          .map((i) => `${i.path.join('.') || '(record)'}: ${i.message}`)
          .join('; ');
    } catch (e) {
      fits = false;
      issues = (e as Error).message;
    }
    if (!fits) return this.reject(key, 'invalid', `not a valid record: ${issues}`);
    return d.value as z.infer<S>;
  }

  private reject(key: string, reason: RejectReason, message: string): undefined {
    const subject = `kv:${this.bucket}`;
    this.sink.count(subject, reason);
    // the key is the coordinator's own kind of id ([-/_=.a-zA-Z0-9]); cut short all the same
    this.log.report(`${subject}:${reason}`, `${subject}: skipped the record ${JSON.stringify(key.slice(0, 200))} (${reason}): ${message.slice(0, 500)}`);
    return undefined;
  }
}

function defaultSink(): RecordSink {
  const log = new Logger('KvRecords');
  return { count: () => undefined, warn: (line) => log.warn(line) };
}

const LeaderLeaseSchema = z.object({ holder: z.string(), expiresAt: z.number() });

/** The schema of a key of the cluster's state bucket (KV_KEYS); unknown keys need only be JSON. */
export function stateRecordSchema(key: string): z.ZodTypeAny {
  if (key.startsWith(KV_KEYS.agentsPrefix)) return AgentRecordSchema;
  if (key.startsWith(KV_KEYS.groupsPrefix)) return GroupRecordSchema;
  if (key.startsWith(KV_KEYS.rendezvous(''))) return RdzvRecordSchema;
  if (key.startsWith(KV_KEYS.serviceGroupsPrefix)) return ServiceGroupRoundSchema;
  if (key === KV_KEYS.groupCounter) return z.number().int().min(0);
  if (key === KV_KEYS.leader) return LeaderLeaseSchema;
  return z.unknown();
}

// One service group's messages on NATS, for its members and its agents' member workers: every
// message published carries Cmesh-Mac (the group's key, see @cmesh/protocol's service-groups-auth.ts),
// every message received is checked first and dropped when the MAC fails, and nothing a publisher
// sends reaches nats.js as an exception (a throw in a subscription callback leaves the connection
// connected but deaf). Drops are counted by reason and logged at most once per interval.
import { Msg, NatsConnection, Subscription, headers } from '@nats-io/nats-core';
import { z } from 'zod';
import { DEFAULT_MAX_PAYLOAD, SERVICE_GROUP_HEADERS, SERVICE_GROUP_MAC_HEADER, decodeMessage, serviceGroupMac, serviceGroupMacValid } from '@cmesh/protocol';
import { RateLimitedLog } from '@cmesh/protocol/kit';

/** Why a message of the group was dropped. */
export type ServiceGroupDropReason =
  /** its MAC is missing or wrong: not from a holder of the group's secret */
  | 'bad_mac'
  /** its body is not JSON, too large, or not the subject's schema */
  | 'not_json'
  | 'too_large'
  | 'invalid'
  /** authentic, but seen before (a replay within the round): harmless, ignored */
  | 'duplicate'
  /** authentic, but nothing waits for it, or over a buffer's limit */
  | 'unexpected'
  | 'over_limit'
  /** the handler threw (a bug): the message is dropped, the connection keeps reading */
  | 'handler_error';

/** Room left in each message for its headers (Cmesh-Seq, Cmesh-Offset, Cmesh-Mac). */
const HEADER_ROOM = 1024;
/** At most one warning per subject kind and reason in this time. */
const LOG_INTERVAL_MS = 10_000;

export interface GroupChannelOptions {
  /** where drop warnings go (rate-limited) */
  warn(line: string): void;
  /** each drop, for a metric: `what` is the subject's kind (op, res, hb, end, status), bounded */
  onDrop?(what: string, reason: ServiceGroupDropReason): void;
  /** names this side in warnings: `group g_1 rank 0 (member)` */
  label: string;
}

export class GroupChannel {
  /** messages dropped, by reason */
  readonly dropped: Partial<Record<ServiceGroupDropReason, number>> = {};
  private readonly log: RateLimitedLog;

  constructor(
    private readonly nc: NatsConnection,
    private readonly key: Uint8Array,
    private readonly opts: GroupChannelOptions,
  ) {
    this.log = new RateLimitedLog(opts.warn, LOG_INTERVAL_MS);
  }

  /** The largest chunk this connection's server accepts (its max_payload less room for headers). */
  chunkBytes(): number {
    return Math.max(1024, (this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) - HEADER_ROOM);
  }

  /** Publishes `payload` with its MAC (and, for a data chunk, its op number and offset). */
  publish(subject: string, payload: Uint8Array, chunk?: { seq: number; offset: number }, reply?: string): void {
    if (this.nc.isClosed()) return;
    const h = headers();
    const seq = chunk ? String(chunk.seq) : undefined;
    const offset = chunk ? String(chunk.offset) : undefined;
    if (chunk) {
      h.set(SERVICE_GROUP_HEADERS.seq, seq!);
      h.set(SERVICE_GROUP_HEADERS.offset, offset!);
    }
    h.set(SERVICE_GROUP_MAC_HEADER, serviceGroupMac(this.key, subject, seq, offset, payload));
    this.nc.publish(subject, payload, { headers: h, ...(reply ? { reply } : {}) });
  }

  /** A JSON message (an op or result header, a heartbeat, an end). */
  json(subject: string, body: unknown, reply?: string): void {
    this.publish(subject, Buffer.from(JSON.stringify(body)), undefined, reply);
  }

  /** `data` in chunks of at most chunkBytes(), each with Cmesh-Seq and Cmesh-Offset. */
  chunks(subject: string, seq: number, data: Uint8Array): void {
    const step = this.chunkBytes();
    for (let offset = 0; offset < data.byteLength; offset += step)
      this.publish(subject, data.subarray(offset, Math.min(offset + step, data.byteLength)), { seq, offset });
  }

  /** Answers a request on its reply subject, under the MAC (bound to that subject). */
  respond(m: Msg, body: unknown): void {
    if (m.reply) this.json(m.reply, body);
  }

  /**
   * Subscribes `subject`; `handler` sees only messages whose MAC holds. `what` names the subject's
   * kind in counts and warnings.
   */
  subscribe(subject: string, what: string, handler: (m: Msg) => void): Subscription {
    return this.nc.subscribe(subject, {
      callback: (err, m) => {
        if (err) return this.log.report(`${what}:error`, `${this.opts.label}: ${what} subscription: ${err.message}`);
        try {
          if (!serviceGroupMacValid(this.key, m.subject, m.headers, m.data))
            return this.drop(what, 'bad_mac', `${m.data.byteLength} bytes without a valid ${SERVICE_GROUP_MAC_HEADER}`);
          handler(m);
        } catch (e) {
          this.drop(what, 'handler_error', e instanceof Error ? (e.stack ?? e.message) : String(e));
        }
      },
    });
  }

  /** A JSON body of `schema` through the guarded decoder, or undefined (dropped, counted). */
  decode<S extends z.ZodTypeAny>(what: string, schema: S, m: Msg): z.infer<S> | undefined {
    const d = decodeMessage(schema, m.data);
    if (d.ok) return d.value;
    this.drop(what, d.reason as ServiceGroupDropReason, `${d.message}${d.issues?.length ? `: ${d.issues.slice(0, 3).join('; ')}` : ''}`);
    return undefined;
  }

  /** Counts a dropped message and warns (at most once per interval per kind and reason). */
  drop(what: string, reason: ServiceGroupDropReason, detail = ''): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
    this.opts.onDrop?.(what, reason);
    this.log.report(`${what}:${reason}`, `${this.opts.label}: dropped a message on ${what} (${reason})${detail ? `: ${detail}` : ''}`);
  }
}

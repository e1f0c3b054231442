// A KV bucket's stream, reached by the names the JetStream KV spec (ADR-8) fixes: stream
// `KV_<bucket>`, one subject per key `$KV.<bucket>.<key>` (our buckets store keys as they are: no
// key codec, no mirror). nats.js's KV has no public way to list keys in one answer or to purge a
// key without a marker; its stream manager has both.
//
// Listing: the stream's per-subject counts, one answer from the server. nats.js's kv.keys() walks
// an ordered consumer until `pending` reaches 0, and a key rewritten meanwhile comes twice: with 4
// agents heartbeating as fast as they can, 369 of 2000 listings had a duplicate (agents listed
// twice, so "4 agents up" was seen with 3). nats.go fixed the same race (nats-io/nats.go#1884).
// Deleted keys keep their delete marker's subject: callers read each key and skip the missing ones.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';

export class KvStream {
  /** the stream under the bucket */
  readonly name: string;
  private readonly prefix: string;

  constructor(
    readonly jsm: JetStreamManager,
    readonly bucket: string,
  ) {
    this.name = `KV_${bucket}`;
    this.prefix = `$KV.${bucket}.`;
  }

  static async of(nc: NatsConnection, bucket: string): Promise<KvStream> {
    return new KvStream(await jetstreamManager(nc), bucket);
  }

  /** The subject a key's values are stored under (`filter`: a key pattern with `*` and `>`). */
  subject(key: string): string {
    return this.prefix + key;
  }

  /** Every key matching `filter` (`>`: all), deleted ones included (their marker's subject). */
  async keys(filter = '>'): Promise<string[]> {
    const info = await this.jsm.streams.info(this.name, { subjects_filter: this.subject(filter) });
    return Object.keys(info.state.subjects ?? {}).map((s) => s.substring(this.prefix.length));
  }

  /** Removes every message of the key: no delete marker is left. */
  async purge(key: string): Promise<void> {
    await this.jsm.streams.purge(this.name, { filter: this.subject(key) });
  }
}

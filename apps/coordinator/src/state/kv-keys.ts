// The keys of a JetStream KV bucket, from the stream's per-subject counts: one answer from the
// server. nats.js's kv.keys() walks an ordered consumer until `pending` reaches 0, and a key
// rewritten meanwhile comes twice: with 4 agents heartbeating as fast as they can, 369 of 2000
// listings had a duplicate (agents listed twice, so "4 agents up" was seen with 3). nats.go fixed
// the same race (nats-io/nats.go#1884). Deleted keys keep their delete marker's subject: callers
// read each key and skip the missing ones.
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';

/** The fields of nats.js's Bucket (the class behind every KV) that this needs. */
interface BucketInternals {
  jsm: JetStreamManager;
  stream: string;
  prefixLen: number;
  subjectForKey(key: string): string;
  decodeKey(key: string): string;
}

export async function kvKeys(kv: KV, filter = '>'): Promise<string[]> {
  const b = kv as unknown as BucketInternals;
  const info = await b.jsm.streams.info(b.stream, { subjects_filter: b.subjectForKey(filter) });
  return Object.keys(info.state.subjects ?? {}).map((s) => b.decodeKey(s.substring(b.prefixLen)));
}

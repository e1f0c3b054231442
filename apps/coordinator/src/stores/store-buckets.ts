// Creating a store bucket: the coordinator is the only login that may create streams, so it makes
// every store bucket (its jobs' and service groups' own, and those ranks ask for on
// `<cluster>.stores.open`), each with one value per key and limits on bytes and age.
import type { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { createKv } from '../nats/bucket-replicas';
import { ClusterNames, DEFAULT_STORE_MAX_AGE_S, DEFAULT_STORE_MAX_BYTES } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';
import { isStreamNotFound } from '../nats/stream-not-found';

export interface StoreLimits {
  /** bytes one bucket may hold; a write past it is refused (discard new) */
  maxBytes: number;
  /** a key older than this is dropped, seconds */
  maxAgeS: number;
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { maxBytes: DEFAULT_STORE_MAX_BYTES, maxAgeS: DEFAULT_STORE_MAX_AGE_S };

/** A name that is not one of this cluster's store buckets: refused with BAD_REQUEST, nothing created. */
function checkStoreBucket(names: ClusterNames, bucket: string): void {
  if (!names.stores.parse(bucket)) {
    const form = names.stores.bucket('jobs', 'x').replace(/_jobs_x$/, '_<kind>_<id>');
    throw new ReplyError('BAD_REQUEST', `${JSON.stringify(bucket)} is not a store bucket of cluster ${names.cluster} (${form})`);
  }
}

/**
 * Creates the store bucket unless it exists (idempotent: replicas and ranks may ask at once);
 * true when this call created it. Only names checkStoreBucket accepts.
 */
export async function openStoreBucket(nc: NatsConnection, names: ClusterNames, bucket: string, limits: StoreLimits = DEFAULT_STORE_LIMITS): Promise<boolean> {
  checkStoreBucket(names, bucket);
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.info(`KV_${bucket}`);
    return false;
  } catch (e) {
    if (!isStreamNotFound(e)) throw e;
  }
  // Kvm.create creates it when missing, and takes it as it is when another made it meanwhile
  await createKv(nc, bucket, { history: 1, max_bytes: limits.maxBytes, ttl: limits.maxAgeS * 1000 });
  return true;
}

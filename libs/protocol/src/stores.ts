// Store buckets: the JetStream KV buckets process groups rendezvous through (jobs, service
// groups, nats:// init methods, `cmesh run --rdzv-backend nats`). Only the coordinator may create
// streams, so a rank whose bucket is missing asks it: `<cluster>.stores.open`. It creates only
// names of its cluster's store pattern (clusterNames().stores), with one value per key and byte
// and age limits, and answers the same for a bucket that exists already.
import { z } from 'zod';
import type { ErrorReply } from './reply';

export const StoreOpenSchema = z.object({
  /** the whole bucket name (clusterNames().stores.bucket) */
  bucket: z.string().regex(/^[A-Za-z0-9_-]{1,255}$/, 'letters, digits, _ and - only (1..255)'),
});
export type StoreOpen = z.infer<typeof StoreOpenSchema>;

export type StoreOpenReply = { ok: true; bucket: string; created: boolean } | ErrorReply;

/** Defaults of the coordinator's limits on one store bucket (CMESH_STORE_MAX_BYTES, CMESH_STORE_MAX_AGE_S). */
export const DEFAULT_STORE_MAX_BYTES = 64 * 1024 * 1024;
export const DEFAULT_STORE_MAX_AGE_S = 7 * 24 * 3600;

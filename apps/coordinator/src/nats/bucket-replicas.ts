// Every KV bucket the coordinator makes gets the mesh's replica count (CMESH_NATS_REPLICAS, else
// min(3, the cluster's JetStream servers): natsReplicas of @cmesh/collectives), found once per
// process from the first connection that asks. On start, checkBucketReplicas compares the
// cluster's existing buckets with it and raises those below it (JetStream moves a stream to more
// replicas in place); one it cannot raise, or one above it, is said in the log and left as it is.
import { Logger } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager, StreamInfo } from '@nats-io/jetstream';
import { KV, KvOptions, Kvm } from '@nats-io/kv';
import { ClusterNames } from '@cmesh/protocol';
import { NatsReplicas, configuredReplicas, isTransientNatsError, natsReplicas } from '@cmesh/collectives/nats';

let configured: number | undefined;
let wanted: Promise<NatsReplicas> | null = null;

/** The setting (CMESH_NATS_REPLICAS / --nats-replicas); before the first bucket is made. */
export function configureBucketReplicas(replicas: number | undefined): void {
  configured = replicas;
  wanted = null;
}

/** The replica count for the cluster's buckets, and why (resolved once, from `nc`). */
function bucketReplicas(nc: NatsConnection): Promise<NatsReplicas> {
  wanted ??= natsReplicas(nc, configured ?? configuredReplicas(process.env.CMESH_NATS_REPLICAS)).catch((e) => {
    wanted = null;
    throw e;
  });
  return wanted;
}

/** JetStream cannot place a stream of this many replicas on the servers up now (one of three is down or restarting). */
function isPlacementError(e: unknown): boolean {
  return /no suitable peers for placement|insufficient resources|peer offline/i.test((e as Error)?.message ?? '');
}

/** How long a creation that times out (a cluster electing, placing slowly after a server's death) is asked for again. */
const PLACEMENT_WAIT_MS = 15_000;

/**
 * Kvm.create with the mesh's replica count (an existing bucket is taken as it is). Where the
 * cluster refuses to place that many now (a server down or restarting: "no suitable peers for
 * placement"), one replica fewer, down to 1, with a warning: a job or group starting while a
 * server is away gets its bucket on the servers that are up instead of waiting for the one that is
 * not (for as long as a lost machine stays lost), and the next check (checkBucketReplicas: on start
 * and every REPLICA_CHECK_MS) raises it once the cluster can place it. A creation that times out
 * may still complete (JetStream goes on placing it): it is asked for again, as it is, for up to
 * PLACEMENT_WAIT_MS.
 */
export async function createKv(nc: NatsConnection, bucket: string, opts: Partial<KvOptions>, waitMs = PLACEMENT_WAIT_MS): Promise<KV> {
  const { replicas, why } = await bucketReplicas(nc);
  const end = Date.now() + waitMs;
  for (let r = replicas; ; ) {
    try {
      const kv = await new Kvm(nc).create(bucket, { ...opts, replicas: r });
      if (r < replicas)
        log.warn(
          `NATS replicas: bucket ${bucket} made with ${r} replica(s), not ${replicas}: the cluster cannot place ${replicas} now (a server down?); the next check raises it`,
        );
      return kv;
    } catch (e) {
      if (r > 1 && isPlacementError(e)) r--;
      else if (!isTransientNatsError(e) || Date.now() >= end)
        throw new Error(`KV bucket ${bucket} with ${r} replicas (${why}): ${(e as Error).message}`, { cause: e });
      else await new Promise((res) => setTimeout(res, 250));
    }
  }
}

const log = new Logger('NatsReplicas');

/** How often the coordinator checks the buckets again (raising those made with fewer while a server was away). */
export const REPLICA_CHECK_MS = 5 * 60_000;

/** Whether a stream is one of this cluster's buckets: its own (state, jobs, ...) or a store bucket. */
function isClusterBucket(names: ClusterNames, stream: string): boolean {
  if (!stream.startsWith('KV_')) return false;
  const bucket = stream.slice(3);
  return Object.values(names.buckets).includes(bucket) || names.stores.parse(bucket) !== null;
}

export interface ReplicaCheck {
  wanted: NatsReplicas;
  /** buckets already at the wanted count */
  ok: string[];
  /** raised: bucket, from */
  raised: { bucket: string; from: number }[];
  /** above the wanted count: left as they are */
  above: { bucket: string; has: number }[];
  /** below it and could not be raised, with JetStream's reason */
  failed: { bucket: string; has: number; why: string }[];
}

/** Compares every bucket of the cluster with the wanted replica count and raises those below it. */
export async function checkBucketReplicas(nc: NatsConnection, names: ClusterNames): Promise<ReplicaCheck> {
  const wanted = await bucketReplicas(nc);
  const out: ReplicaCheck = { wanted, ok: [], raised: [], above: [], failed: [] };
  const jsm = await jetstreamManager(nc);
  const found: StreamInfo[] = [];
  for await (const si of jsm.streams.list()) if (isClusterBucket(names, si.config.name)) found.push(si);
  for (const si of found) {
    const bucket = si.config.name.slice(3);
    const has = si.config.num_replicas || 1;
    if (has === wanted.replicas) out.ok.push(bucket);
    else if (has > wanted.replicas) out.above.push({ bucket, has });
    else {
      try {
        await jsm.streams.update(si.config.name, { ...si.config, num_replicas: wanted.replicas });
        out.raised.push({ bucket, from: has });
      } catch (e) {
        out.failed.push({ bucket, has, why: (e as Error).message });
      }
    }
  }
  return out;
}

/** The check's result in lines for the log: the first says what is wanted and why. */
export function describeReplicaCheck(c: ReplicaCheck): { info: string[]; warn: string[] } {
  const info = [`NATS replicas: buckets get ${c.wanted.replicas} (${c.wanted.why}); ${c.ok.length} bucket(s) have it`];
  if (c.raised.length) info.push(`NATS replicas: raised to ${c.wanted.replicas}: ${c.raised.map((r) => `${r.bucket} (was ${r.from})`).join(', ')}`);
  const warn: string[] = [];
  if (c.above.length)
    warn.push(
      `NATS replicas: kept above ${c.wanted.replicas} (lower them with \`nats stream edit --replicas\` if meant): ${c.above.map((r) => `${r.bucket} (${r.has})`).join(', ')}`,
    );
  for (const f of c.failed) warn.push(`NATS replicas: cannot raise ${f.bucket} from ${f.has} to ${c.wanted.replicas}: ${f.why}`);
  return { info, warn };
}

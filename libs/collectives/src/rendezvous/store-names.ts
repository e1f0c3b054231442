// The names of a cluster's store buckets (the JetStream KV buckets process groups rendezvous
// through) and of the coordinator's subject that creates them. @cmesh/protocol's clusterNames()
// hands these out as `names.stores`; they live here because the nats:// init method needs them and
// this library cannot depend on the protocol.
//
// A bucket name is one subject token, so NATS permissions cannot tell one store bucket from
// another: a store bucket's name is its capability. Every name therefore carries an unguessable
// id: 128 random bits (jobs, service groups: the coordinator makes them), or an HMAC of a secret
// only the run's launchers hold (nats:// init methods, `cmesh run --rdzv-backend nats`).
//
// The default cluster's buckets are `cmesh_store_<kind>_<id>`, another cluster's
// `cmesh_<cluster>_store_<kind>_<id>`: cluster names have no `_` and may not be `store`, and ids
// have no `_`, so no two clusters' (or kinds') names meet.
import { createHmac, randomBytes } from 'crypto';
import { InvalidArgumentError } from '../errors';
import { natsLogin } from './nats-credentials';

export const STORE_KINDS = ['jobs', 'svc', 'rdzv', 'init'] as const;
/** jobs: a job the coordinator runs; svc: a service group; rdzv: `cmesh run --rdzv-backend nats`; init: a nats:// init method */
export type StoreKind = (typeof STORE_KINDS)[number];

/** The default cluster (@cmesh/protocol's DEFAULT_CLUSTER): its names carry no cluster. */
const DEFAULT = 'default';
const CLUSTER = /^[A-Za-z0-9-]{1,64}$/;
const ID = /^[A-Za-z0-9-]{1,128}$/;
const BUCKET = new RegExp(`^cmesh_(?:([A-Za-z0-9-]{1,64})_)?store_(${STORE_KINDS.join('|')})_([A-Za-z0-9-]{1,128})$`);

const base = (cluster: string) => {
  if (cluster !== DEFAULT && !CLUSTER.test(cluster))
    throw new InvalidArgumentError(`cluster name ${JSON.stringify(cluster)}: letters, digits and - only (1..64)`);
  return cluster === DEFAULT ? 'cmesh_store' : `cmesh_${cluster}_store`;
};

/** The store bucket of a cluster for one id of a kind (the id: letters, digits and -). */
export function storeBucket(cluster: string, kind: StoreKind, id: string): string {
  if (!(STORE_KINDS as readonly string[]).includes(kind))
    throw new InvalidArgumentError(`store kind ${JSON.stringify(kind)}: one of ${STORE_KINDS.join(', ')}`);
  if (!ID.test(id)) throw new InvalidArgumentError(`store id ${JSON.stringify(id)}: letters, digits and - only (1..128)`);
  return `${base(cluster)}_${kind}_${id}`;
}

/** What a store bucket name says (its cluster, kind and id); null for any other name. */
export function parseStoreBucket(bucket: string): { cluster: string; kind: StoreKind; id: string } | null {
  const m = BUCKET.exec(bucket);
  if (!m || m[1] === 'store') return null;
  return { cluster: m[1] ?? DEFAULT, kind: m[2] as StoreKind, id: m[3] };
}

/** The coordinator's request subject that creates a store bucket of the cluster (StoreOpen -> StoreOpenReply). */
export function storesOpenSubject(cluster: string): string {
  base(cluster);
  return cluster === DEFAULT ? 'cmesh.stores.open' : `cmesh.${cluster}.stores.open`;
}

/** 128 random bits, hex: the unguessable part of a bucket the coordinator names. */
export function randomStoreId(): string {
  return randomBytes(16).toString('hex');
}

/**
 * The secret a run's launchers share and others do not: CMESH_SECRET, else the password of the
 * NATS login (read as natsLogin reads it); '' with neither (a server without authentication, where
 * names keep nobody out anyway).
 */
export function launcherSecret(env: NodeJS.ProcessEnv = process.env): string {
  return env.CMESH_SECRET || natsLogin(env).pass || '';
}

/**
 * 128 bits of HMAC-SHA256(secret, kind, cluster, name), hex: the id of the store bucket of a
 * name its users chose (a nats:// job, an --rdzv-id). Another login, without the secret, can
 * neither derive nor guess it.
 */
export function derivedStoreId(secret: string, cluster: string, kind: StoreKind, name: string): string {
  return createHmac('sha256', secret).update(`cmesh store\0${kind}\0${cluster}\0${name}`).digest('hex').slice(0, 32);
}

/** A value derived from the same secret for another purpose (label), e.g. a run's data-plane secret. */
export function derivedSecret(secret: string, label: string): string {
  return createHmac('sha256', secret).update(`cmesh secret\0${label}`).digest('base64url');
}

/** The store bucket of a nats:// init method's `<job>` (env: CMESH_CLUSTER, CMESH_SECRET, the NATS login). */
export function jobBucket(job: string, env: NodeJS.ProcessEnv = process.env): string {
  if (parseStoreBucket(job)) return job;
  const cluster = env.CMESH_CLUSTER || 'default';
  return storeBucket(cluster, 'init', derivedStoreId(launcherSecret(env), cluster, 'init', job));
}

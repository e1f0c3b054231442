// How many copies of each JetStream bucket the mesh keeps: CMESH_NATS_REPLICAS when set, else
// min(3, the cluster's JetStream servers), as NATS's own guidance has it (R3 survives one
// server's loss; a single server can only keep R1). The cluster's size comes from the servers:
// every server of the account's cluster answers the account's STATZ ping ($SYS.REQ.ACCOUNT.PING.STATZ,
// which the coordinator's login may publish), each saying whether it runs JetStream. Where that
// ping gets no answer (a login not allowed it), the client URLs the server advertised count instead.
import type { NatsConnection } from '@nats-io/nats-core';

/** The environment variable of the replica count. */
export const NATS_REPLICAS_ENV = 'CMESH_NATS_REPLICAS';
/** JetStream's largest replica count. */
export const MAX_NATS_REPLICAS = 5;

export interface NatsClusterSize {
  /** JetStream servers in the cluster (1 for a server on its own) */
  size: number;
  /** how it was found, for the log */
  how: string;
}

const STATZ = '$SYS.REQ.ACCOUNT.PING.STATZ';

/** The JetStream servers of the connection's cluster, answering within `waitMs`. */
export async function natsClusterSize(nc: NatsConnection, waitMs = 2000): Promise<NatsClusterSize> {
  const info = nc.info;
  if (!info?.cluster) return { size: 1, how: `server ${info?.server_name ?? nc.getServer()} is not in a cluster` };
  const js = new Set<string>();
  try {
    // every server answers; done once none answered for 500 ms (or at waitMs)
    const replies = await nc.requestMany(STATZ, JSON.stringify({ include_unused: true }), { strategy: 'stall', stall: 500, maxWait: waitMs });
    for await (const m of replies) {
      const s = (m.json() as { server?: { id?: string; jetstream?: boolean } }).server;
      if (s?.id && s.jetstream) js.add(s.id);
    }
  } catch {
    // not allowed, or no responders: the advertised URLs below
  }
  if (js.size) return { size: js.size, how: `${js.size} JetStream servers of cluster ${info.cluster} answered the account's STATZ ping` };
  const urls = new Set(info.connect_urls ?? []);
  return { size: Math.max(1, urls.size), how: `cluster ${info.cluster} advertises ${urls.size} client URLs (the STATZ ping got no answer)` };
}

/** CMESH_NATS_REPLICAS's value, checked: undefined when unset or empty. */
export function configuredReplicas(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const n = Number(text.trim());
  if (!Number.isInteger(n) || n < 1 || n > MAX_NATS_REPLICAS)
    throw new RangeError(`${NATS_REPLICAS_ENV}=${JSON.stringify(text)}: an integer in [1, ${MAX_NATS_REPLICAS}]`);
  return n;
}

export interface NatsReplicas {
  replicas: number;
  /** why this many, for the log */
  why: string;
}

/** The replica count for new buckets: `configured` (CMESH_NATS_REPLICAS) or min(3, the cluster's size). */
export async function natsReplicas(nc: NatsConnection, configured?: number): Promise<NatsReplicas> {
  if (configured !== undefined) return { replicas: configured, why: `${NATS_REPLICAS_ENV}=${configured}` };
  const { size, how } = await natsClusterSize(nc);
  return { replicas: Math.min(3, size), why: `min(3, ${size}): ${how}` };
}

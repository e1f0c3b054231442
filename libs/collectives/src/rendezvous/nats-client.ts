// The NATS client (nats.js v3: @nats-io/transport-node, and @nats-io/jetstream with @nats-io/kv
// for a store), loaded on first use: they are optional peer dependencies, so the library core and
// an application that never uses nats:// do not need them.
import type * as Core from '@nats-io/nats-core';
import type * as JetStream from '@nats-io/jetstream';
import type * as Kv from '@nats-io/kv';

/** @nats-io/transport-node: its connect and, re-exported, everything of @nats-io/nats-core. */
export type NatsTransport = typeof Core & { connect(opts?: Core.ConnectionOptions): Promise<Core.NatsConnection> };

export interface NatsKvClient {
  transport: NatsTransport;
  jetstream: typeof JetStream;
  kv: typeof Kv;
}

/** Requires the packages `purpose` needs; an Error from `fail` naming what to install otherwise. */
function load<T>(packages: string[], purpose: string, fail: (message: string) => Error): T[] {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer dependencies, loaded only when asked
    return packages.map((p) => require(p) as T);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw e;
    throw fail(`${purpose} needs ${packages.join(', ')} (npm install ${packages.join(' ')})`);
  }
}

export function loadNatsTransport(purpose: string, fail: (message: string) => Error): NatsTransport {
  return load<NatsTransport>(['@nats-io/transport-node'], purpose, fail)[0];
}

export function loadNatsKv(purpose: string, fail: (message: string) => Error): NatsKvClient {
  const [transport, jetstream, kv] = load<unknown>(['@nats-io/transport-node', '@nats-io/jetstream', '@nats-io/kv'], purpose, fail);
  return { transport: transport as NatsTransport, jetstream: jetstream as typeof JetStream, kv: kv as typeof Kv };
}

/**
 * A NATS or JetStream error worth another try: a timeout, no responders (503, e.g. while a
 * stream is created or elected; JetStream reports it as "jetstream is not enabled" with the
 * request's no-responders error as its cause). By name: the classes come from packages loaded lazily.
 */
export function isTransientNatsError(err: unknown): boolean {
  for (let e = err as (Error & { isNoResponders?: () => boolean; cause?: unknown }) | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.name === 'TimeoutError' || e.name === 'NoResponders') return true;
    if (e.name === 'RequestError' && e.isNoResponders?.()) return true;
    if (e.name !== 'JetStreamNotEnabled' && e.name !== 'RequestError') return false;
  }
  return false;
}

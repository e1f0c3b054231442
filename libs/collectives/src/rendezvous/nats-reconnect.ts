// How every cmesh NATS connection rides over a server's restart or a cluster failover: it
// reconnects with no attempt budget (an operation's own deadline bounds the wait, not the client),
// and a ConnectionWatch per connection knows since when it is disconnected, so an operation whose
// deadline passes while it is down fails with NatsConnectionLostError naming the servers and the
// outage instead of a bare timeout. Types only from nats.js: the library loads it lazily.
import type { NatsConnection, Status } from '@nats-io/nats-core';
import { ErrorContext, NatsConnectionLostError } from '../errors';

/**
 * Options for connect(): reconnect forever, first try after 250-500 ms and then every 500 ms
 * plus jitter (a restarted server or another cluster node is found within about a second), and a
 * ping every 10 s so that a server gone without closing its socket is noticed within about 30 s.
 */
export const NATS_RECONNECT = {
  maxReconnectAttempts: -1,
  reconnectTimeWait: 500,
  reconnectJitter: 250,
  reconnectJitterTLS: 500,
  pingInterval: 10_000,
  maxPingOut: 3,
} as const;

/** `nats://a:4222,nats://b:4222` (a NATS_URL naming several servers of a cluster) as connect()'s list. */
export function natsServers(urls: string | string[]): string[] {
  return (Array.isArray(urls) ? urls : [urls])
    .flatMap((u) => u.split(','))
    .map((u) => u.trim())
    .filter(Boolean);
}

type Listener = (connected: boolean) => void;

export class ConnectionWatch {
  private downSince: number | null = null;
  private closed = false;
  /** how often the connection came back */
  private backs = 0;
  /** when a server was last lost: this connection's own, or one the cluster said left it (null: never) */
  private lostAt: number | null = null;
  private readonly listeners = new Set<Listener>();

  constructor(private readonly nc: NatsConnection) {
    void this.follow();
    void nc.closed().then(() => {
      this.closed = true;
      this.downSince ??= Date.now();
      this.emit(false);
    });
  }

  private async follow(): Promise<void> {
    try {
      for await (const s of this.nc.status() as AsyncIterable<Status>) {
        if (s.type === 'disconnect' && this.downSince === null) {
          this.downSince = this.lostAt = Date.now();
          this.emit(false);
        } else if (s.type === 'reconnect') {
          this.downSince = null;
          this.backs++;
          this.emit(true);
        } else if (s.type === 'update' && s.deleted?.length) {
          // a server the cluster told of is gone: its clients are reconnecting elsewhere now
          this.lostAt = Date.now();
        }
      }
    } catch {
      // the iterator ends with the connection: nc.closed() says so
    }
  }

  private emit(connected: boolean): void {
    for (const l of this.listeners) l(connected);
  }

  /** Called with false when the connection drops, true when it is back. */
  onChange(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** ms this connection has been down (closed for good counts as down), or null while connected. */
  outageMs(now = Date.now()): number | null {
    return this.downSince === null ? null : now - this.downSince;
  }

  /** How often the connection came back after a drop. */
  get reconnects(): number {
    return this.backs;
  }

  /**
   * ms since a NATS server was last lost, as this connection saw it (its own dropped, or the
   * cluster stopped listing one it had told of); null if never. Clients of that server are
   * reconnecting meanwhile, and silent.
   */
  sinceServerLoss(now = Date.now()): number | null {
    return this.lostAt === null ? null : now - this.lostAt;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The servers the connection knows: those it was given and those the cluster told it of. */
  servers(): string[] {
    try {
      const known = this.nc.getServers().map((s) => s.listen);
      return known.length ? [...new Set(known)] : [this.nc.getServer()];
    } catch {
      return [];
    }
  }

  /** NatsConnectionLostError for `what` when the connection is down now, else null. */
  lost(what: string, ctx: ErrorContext = {}, now = Date.now()): NatsConnectionLostError | null {
    const ms = this.outageMs(now);
    return ms === null ? null : connectionLost(what, this.servers(), ms, this.closed, ctx);
  }
}

/** The error, in words: `<what>: the NATS connection (nats://a, nats://b) has been down for 12.3 s`. */
export function connectionLost(what: string, servers: string[], ms: number, closed = false, ctx: ErrorContext = {}): NatsConnectionLostError {
  const list = servers.length ? servers.join(', ') : 'no server known';
  const state = closed ? 'is closed' : `has been down for ${(ms / 1000).toFixed(1)} s (still reconnecting)`;
  return new NatsConnectionLostError(`${what}: the NATS connection (${list}) ${state}`, servers, ms, ctx);
}

const watches = new WeakMap<NatsConnection, ConnectionWatch>();

/** The one ConnectionWatch of a connection (made on first ask: call it right after connect). */
export function watchConnection(nc: NatsConnection): ConnectionWatch {
  let w = watches.get(nc);
  if (!w) watches.set(nc, (w = new ConnectionWatch(nc)));
  return w;
}

/**
 * Drains `nc` (pending messages flushed, subscriptions finished) for at most `withinMs`, then
 * closes it: a drain waits on the server, and a process stopping while its NATS is away (or
 * reconnecting in a failover) must still stop.
 */
export async function drainWithin(nc: NatsConnection, withinMs = 5000): Promise<void> {
  if (nc.isClosed()) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), withinMs)));
  const r = await Promise.race([
    nc.drain().then(
      () => 'drained' as const,
      () => 'failed' as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  if (r !== 'drained' && !nc.isClosed()) await nc.close().catch(() => undefined);
}

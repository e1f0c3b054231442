// The agent's own NATS connection: publishes job events and registration messages, and opens
// the coordinator's store. The NATS controllers are subscribed on it by InboundTransport (nats-transport.ts).
import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { decodeMessage } from '@cmesh/protocol';
import { z } from 'zod';
import { AGENT_CONFIG, AgentConfig } from '../config';
import { NATS_RECONNECT, drainWithin, natsLogin, natsServers, watchConnection } from '@cmesh/collectives';

@Injectable()
export class NatsService implements OnApplicationShutdown {
  private nc: NatsConnection | null = null;

  constructor(@Inject(AGENT_CONFIG) private readonly config: AgentConfig) {}

  async connection(): Promise<NatsConnection> {
    // reconnects for as long as the agent lives: a restarted nats-server must not orphan it
    if (this.nc) return this.nc;
    const nc: NatsConnection = await connect({
      ...natsLogin(),
      ...NATS_RECONNECT,
      servers: natsServers(this.config.natsUrl),
      name: `cmesh-agent-${this.config.name}`,
      timeout: 5000,
    });
    watchConnection(nc);
    return (this.nc = nc);
  }

  /** Publishes now if connected; messages before the connection exists are dropped with a reason. */
  publish(subject: string, body: unknown): void {
    if (!this.nc || this.nc.isClosed()) throw new Error(`NATS is not connected; cannot publish ${subject}`);
    this.nc.publish(subject, JSON.stringify(body));
  }

  /** How often the connection came back after a drop (0 before it exists). */
  reconnects(): number {
    return this.nc ? watchConnection(this.nc).reconnects : 0;
  }

  /** A request whose reply is validated like any inbound message: a malformed one is an error naming why. */
  async request<S extends z.ZodTypeAny>(subject: string, body: unknown, reply: S, timeoutMs = 5000): Promise<z.infer<S>> {
    const nc = await this.connection();
    const msg = await nc.request(subject, JSON.stringify(body), { timeout: timeoutMs });
    const d = decodeMessage(reply, msg.data);
    if (!d.ok) throw new Error(`malformed reply on ${subject} (${d.reason}): ${d.message}${d.issues ? `: ${d.issues.join('; ')}` : ''}`);
    return d.value;
  }

  async onApplicationShutdown(): Promise<void> {
    const nc = this.nc;
    this.nc = null;
    if (nc) await drainWithin(nc);
  }
}

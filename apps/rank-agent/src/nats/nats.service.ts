// The agent's own NATS connection: publishes job events and registration messages, and opens
// the coordinator's store. Inbound subjects are subscribed on it through InboundMessages.
import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { connect, JSONCodec, NatsConnection } from 'nats';
import { AGENT_CONFIG, AgentConfig } from '../config';

const json = JSONCodec();

@Injectable()
export class NatsService implements OnApplicationShutdown {
  private nc: NatsConnection | null = null;

  constructor(@Inject(AGENT_CONFIG) private readonly config: AgentConfig) {}

  async connection(): Promise<NatsConnection> {
    if (!this.nc) this.nc = await connect({ servers: this.config.natsUrl, name: `cmesh-agent-${this.config.name}`, timeout: 5000 });
    return this.nc;
  }

  /** Publishes now if connected; messages before the connection exists are dropped with a reason. */
  publish(subject: string, body: unknown): void {
    if (!this.nc || this.nc.isClosed()) throw new Error(`NATS is not connected; cannot publish ${subject}`);
    this.nc.publish(subject, json.encode(body));
  }

  async request<T>(subject: string, body: unknown, timeoutMs = 5000): Promise<T> {
    const nc = await this.connection();
    const msg = await nc.request(subject, json.encode(body), { timeout: timeoutMs });
    return json.decode(msg.data) as T;
  }

  async onApplicationShutdown(): Promise<void> {
    const nc = this.nc;
    this.nc = null;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
  }
}

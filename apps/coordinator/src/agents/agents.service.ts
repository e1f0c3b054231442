// The agent registry: register, heartbeat, deregister; the leader marks agents lost after the
// configured number of missed heartbeats. Records live in KV (agents.<id>).
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import {
  AgentHeartbeat,
  AgentRecord,
  AgentRegister,
  KV_KEYS,
  PROTOCOL_VERSION,
} from '@cmesh/protocol';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { LeaderService } from '../leader/leader.service';
import { ReplyError } from '../nats/reply-error';
import { KvState } from '../state/kv-state';

export type AgentLostListener = (agent: AgentRecord) => Promise<void>;

@Injectable()
export class AgentsService implements OnModuleInit {
  private readonly lostListeners: AgentLostListener[] = [];

  constructor(
    private readonly state: KvState,
    private readonly leader: LeaderService,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  onModuleInit(): void {
    this.leader.whileLeading(() => this.markLost());
  }

  onAgentLost(fn: AgentLostListener): void {
    this.lostListeners.push(fn);
  }

  /** The NATS reply to register, heartbeat and deregister: the record and the interval to beat at. */
  reply(agent: AgentRecord) {
    return { ok: true, agent, heartbeatMs: this.config.heartbeatMs };
  }

  async register(body: AgentRegister): Promise<AgentRecord> {
    if (body.protocolVersion !== PROTOCOL_VERSION) {
      throw new ReplyError('UNSUPPORTED_VERSION', `protocol version ${body.protocolVersion} is not supported; this coordinator speaks ${PROTOCOL_VERSION}`);
    }
    const now = new Date().toISOString();
    const rec = await this.state.update<AgentRecord>(KV_KEYS.agent(body.agentId), (cur) => ({
      ...body,
      state: 'ready',
      registeredAt: cur && cur.state !== 'lost' ? cur.registeredAt : now,
      lastHeartbeat: now,
      maxHeartbeatGapSeconds: 0,
    }));
    return rec!;
  }

  async heartbeat(body: AgentHeartbeat): Promise<AgentRecord> {
    let missing = false;
    const rec = await this.state.update<AgentRecord>(KV_KEYS.agent(body.agentId), (cur) => {
      if (!cur) {
        missing = true;
        return undefined;
      }
      const now = Date.now();
      const gap = (now - Date.parse(cur.lastHeartbeat)) / 1000;
      return {
        ...cur,
        state: body.busy ? 'busy' : 'ready',
        lastHeartbeat: new Date(now).toISOString(),
        maxHeartbeatGapSeconds: Math.max(cur.maxHeartbeatGapSeconds, gap),
      };
    });
    if (missing || !rec) throw new ReplyError('NOT_FOUND', `agent ${body.agentId} is not registered; register first`);
    return rec;
  }

  async deregister(agentId: string): Promise<AgentRecord> {
    const rec = await this.get(agentId);
    await this.state.delete(KV_KEYS.agent(agentId));
    return rec;
  }

  async get(agentId: string): Promise<AgentRecord> {
    const rec = await this.state.get<AgentRecord>(KV_KEYS.agent(agentId));
    if (!rec) throw new ReplyError('NOT_FOUND', `no agent ${JSON.stringify(agentId)}`);
    return rec;
  }

  list(): Promise<AgentRecord[]> {
    return this.state.list<AgentRecord>(KV_KEYS.agentsPrefix);
  }

  /** Leader only: agents silent for missedHeartbeats x heartbeat become lost. */
  private async markLost(): Promise<void> {
    const limit = this.config.heartbeatMs * this.config.missedHeartbeats;
    const now = Date.now();
    for (const a of await this.list()) {
      if (a.state === 'lost' || now - Date.parse(a.lastHeartbeat) <= limit) continue;
      const lost = await this.state.update<AgentRecord>(KV_KEYS.agent(a.agentId), (cur) =>
        cur && cur.state !== 'lost' && now - Date.parse(cur.lastHeartbeat) > limit ? { ...cur, state: 'lost' } : undefined,
      );
      if (lost?.state === 'lost') for (const fn of this.lostListeners) await fn(lost);
    }
  }
}

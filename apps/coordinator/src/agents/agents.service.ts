// The agent registry: register, heartbeat, deregister; the leader marks agents lost after the
// configured number of missed heartbeats. Records live in KV (agents.<id>) and are written when
// they change (registration, ready/busy/lost, deregistration); every replica mirrors them in
// memory through a KV watch. A heartbeat is O(1) in memory: every replica hears each one on the
// heartbeat subject (the one in the request queue group answers it), so the leader's liveness view
// is whole without a JetStream write per beat.
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import {
  AgentHeartbeat,
  AgentHeartbeatReply,
  AgentHeartbeatSchema,
  AgentRecord,
  AgentRegister,
  ClusterNames,
  KV_KEYS,
  PROTOCOL_VERSION,
  decodeMessage,
  subjectAgent,
  subjectCovers,
} from '@cmesh/protocol';
import { NatsConnection, Subscription } from '@nats-io/nats-core';
import { CLUSTER_NAMES, COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { LeaderService } from '../leader/leader.service';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ReplyError } from '../nats/reply-error';
import { KvMirror } from '../state/kv-mirror';
import { KvState } from '../state/kv-state';
import { Liveness } from './liveness';
import { watchConnection } from '@cmesh/collectives/nats';

export type AgentLostListener = (agent: AgentRecord) => Promise<void>;

@Injectable()
export class AgentsService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Agents');
  private readonly lostListeners: AgentLostListener[] = [];
  private readonly liveness = new Liveness();
  /** the service groups each agent said it serves in its latest heartbeat, and when */
  private readonly serving = new Map<string, { at: number; groups: string[] }>();
  private readonly mirror: KvMirror<AgentRecord>;
  private overheard?: Subscription;

  constructor(
    private readonly state: KvState,
    private readonly leader: LeaderService,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {
    this.mirror = new KvMirror<AgentRecord>(state, KV_KEYS.agentsPrefix);
  }

  async onModuleInit(): Promise<void> {
    // heartbeats answered by another replica: noted here too (the id, from the agent's own
    // subject, and the groups served)
    const subject = this.names.agents.heartbeatWildcard;
    this.overheard = this.nc.subscribe(subject, {
      callback: (err, m) => {
        if (err || !subjectCovers(subject, m.subject)) return;
        const hb = decodeMessage(AgentHeartbeatSchema, m.data);
        const id = subjectAgent(m.subject);
        // a malformed or mismatched heartbeat is refused by the replica that answers it
        if (!hb.ok || hb.value.agentId !== id || !this.mirror.get(id)) return;
        const now = Date.now();
        this.liveness.beat(id, now);
        if (hb.value.serving) this.serving.set(id, { at: now, groups: hb.value.serving });
      },
    });
    await this.mirror.start().catch((e) => this.log.warn(`agent mirror: ${(e as Error).message}; reading KV instead`));
    // NATS back after an outage: nobody could be heard meanwhile, so nobody is judged for it
    watchConnection(this.nc).onChange((up) => up && this.liveness.restartWindow(Date.now()));
    this.leader.whileLeading(() => this.markLost());
  }

  onApplicationShutdown(): void {
    this.overheard?.unsubscribe();
    this.mirror.stop();
  }

  onAgentLost(fn: AgentLostListener): void {
    this.lostListeners.push(fn);
  }

  /** The NATS reply to register, heartbeat and deregister: the record and the interval to beat at. */
  reply(agent: AgentRecord) {
    return { ok: true, agent, heartbeatMs: this.config.heartbeatMs };
  }

  heartbeatReply(agent: AgentRecord): AgentHeartbeatReply {
    return { ok: true, state: agent.state, heartbeatMs: this.config.heartbeatMs };
  }

  async register(body: AgentRegister): Promise<AgentRecord> {
    if (body.protocolVersion !== PROTOCOL_VERSION) {
      throw new ReplyError('UNSUPPORTED_VERSION', `protocol version ${body.protocolVersion} is not supported; this coordinator speaks ${PROTOCOL_VERSION}`);
    }
    const now = Date.now();
    const iso = new Date(now).toISOString();
    const fresh = (cur: AgentRecord | undefined): AgentRecord => ({
      ...body,
      state: 'ready',
      registeredAt: cur && cur.state !== 'lost' ? cur.registeredAt : iso,
      lastHeartbeat: iso,
      maxHeartbeatGapSeconds: 0,
    });
    // an agent none of the replicas knows is created in one round trip; otherwise (or when another
    // writer was first) read-modify-write
    const key = KV_KEYS.agent(body.agentId);
    const first = fresh(undefined);
    const created = !this.mirror.get(body.agentId) && this.mirror.isReady && (await this.state.create(key, first));
    const rec = created ? first : (await this.state.update<AgentRecord>(key, fresh))!;
    this.mirror.set(body.agentId, rec);
    this.liveness.reset(body.agentId, now);
    return rec;
  }

  /** A heartbeat, answered with the agent's record as it is now (REST). */
  async heartbeat(body: AgentHeartbeat): Promise<AgentRecord> {
    return this.live(await this.beat(body));
  }

  /** A heartbeat: O(1) in memory unless the agent's state or backends change; the stored record (NATS answers its state only). */
  async beat(body: AgentHeartbeat): Promise<AgentRecord> {
    const known = await this.durable(body.agentId);
    if (!known) throw new ReplyError('NOT_FOUND', `agent ${body.agentId} is not registered; register first`);
    const now = Date.now();
    this.liveness.beat(body.agentId, now, known.lastHeartbeat);
    const state = body.busy ? 'busy' : 'ready';
    const backends = body.backends && JSON.stringify(body.backends) !== JSON.stringify(known.backends) ? body.backends : undefined;
    if (known.state !== state || backends) {
      // a change of state or backends is durable (and tells the other replicas): one compare-and-set
      const rec = await this.state.update<AgentRecord>(KV_KEYS.agent(body.agentId), (cur) =>
        cur
          ? {
              ...cur,
              state,
              ...(backends ? { backends } : {}),
              lastHeartbeat: new Date(now).toISOString(),
              maxHeartbeatGapSeconds: Math.max(cur.maxHeartbeatGapSeconds, this.liveness.maxGap(body.agentId)),
            }
          : undefined,
      );
      if (!rec) throw new ReplyError('NOT_FOUND', `agent ${body.agentId} is not registered; register first`);
      this.mirror.set(body.agentId, rec);
      return rec;
    }
    return known;
  }

  async deregister(agentId: string): Promise<AgentRecord> {
    const rec = await this.get(agentId);
    await this.state.delete(KV_KEYS.agent(agentId));
    this.mirror.delete(agentId);
    this.liveness.reset(agentId);
    this.serving.delete(agentId);
    return rec;
  }

  async get(agentId: string): Promise<AgentRecord> {
    const rec = await this.durable(agentId);
    if (!rec) throw new ReplyError('NOT_FOUND', `no agent ${JSON.stringify(agentId)}`);
    return this.live(rec);
  }

  async list(): Promise<AgentRecord[]> {
    const all = this.mirror.isReady
      ? this.mirror.values().sort((a, b) => (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0))
      : await this.state.list<AgentRecord>(KV_KEYS.agentsPrefix);
    return all.map((a) => this.live(a));
  }

  /** Every agent's id, state and when it was last heard (ms since epoch), without building records: for /metrics at thousands of agents. */
  async heard(): Promise<{ agentId: string; state: AgentRecord['state']; lastHeardMs: number }[]> {
    const all = this.mirror.isReady ? this.mirror.values() : await this.state.list<AgentRecord>(KV_KEYS.agentsPrefix);
    return all.map((a) => ({ agentId: a.agentId, state: a.state, lastHeardMs: this.liveness.lastHeard(a.agentId, a.lastHeartbeat) }));
  }

  /** The stored record: from the mirror, or KV when the mirror has not seen it (yet). */
  private async durable(agentId: string): Promise<AgentRecord | undefined> {
    const m = this.mirror.get(agentId);
    if (m) return m;
    const rec = await this.state.get<AgentRecord>(KV_KEYS.agent(agentId));
    if (rec) this.mirror.set(agentId, rec);
    return rec;
  }

  /** The service groups the agent said it serves in its latest heartbeat heard here, and when (undefined: none heard). */
  servingReport(agentId: string): { at: number; groups: string[] } | undefined {
    return this.serving.get(agentId);
  }

  /** The stored record with this replica's latest heartbeat time and largest gap. */
  private live(a: AgentRecord): AgentRecord {
    const last = this.liveness.lastHeard(a.agentId, a.lastHeartbeat);
    const gap = Math.max(a.maxHeartbeatGapSeconds, this.liveness.maxGap(a.agentId));
    return last === Date.parse(a.lastHeartbeat) && gap === a.maxHeartbeatGapSeconds
      ? a
      : { ...a, lastHeartbeat: new Date(last).toISOString(), maxHeartbeatGapSeconds: gap };
  }

  /** Leader only: agents silent for missedHeartbeats x heartbeat become lost (the check is in memory). */
  private async markLost(): Promise<void> {
    // disconnected: the silence is ours (a write queued now would land after the reconnect)
    const conn = watchConnection(this.nc);
    if (!this.mirror.isReady || conn.outageMs() !== null) return;
    const limit = this.config.heartbeatMs * this.config.missedHeartbeats;
    const now = Date.now();
    for (const a of this.mirror.values()) {
      if (a.state === 'lost' || !this.liveness.silent(a.agentId, a.lastHeartbeat, now, limit)) continue;
      const lost = await this.state.update<AgentRecord>(KV_KEYS.agent(a.agentId), (cur) =>
        cur && cur.state !== 'lost' && conn.outageMs() === null && this.liveness.silent(cur.agentId, cur.lastHeartbeat, Date.now(), limit)
          ? { ...this.live(cur), state: 'lost' }
          : undefined,
      );
      if (!lost) continue;
      this.mirror.set(a.agentId, lost);
      if (lost.state === 'lost') for (const fn of this.lostListeners) await fn(lost);
    }
  }
}

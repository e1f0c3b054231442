// Rendezvous over KV (rdzv.<runId>): any replica can serve a join; the leader closes rounds whose
// last call is over and reopens rounds that lost a member. Gets close overdue rounds too, so a
// restarted or leaderless coordinator never leaves a rendezvous stuck. Joins are group-committed:
// those that arrive while a run's record is being written are admitted together by the next
// compare-and-set, and each is answered once that write is stored.
import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { KV_KEYS, RdzvJoin, RdzvRecord, RdzvReply } from '@cmesh/protocol';
import { AgentsService } from '../agents/agents.service';
import { LeaderService } from '../leader/leader.service';
import { ReplyError } from '../nats/reply-error';
import { GroupCommit, Outcome } from '../state/group-commit';
import { KvMirror } from '../state/kv-mirror';
import { KvState } from '../state/kv-state';
import * as rounds from './rounds';

const PREFIX = 'rdzv.';

@Injectable()
export class RendezvousService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Rendezvous');
  private readonly closedListeners: ((seconds: number) => void)[] = [];
  private readonly noted = new Set<string>();
  private readonly joins = new GroupCommit<RdzvJoin, RdzvReply>((key, js) => this.admit(key, js));
  /** every round in memory: the leader's tick looks for overdue rounds without decoding each from KV */
  private readonly mirror: KvMirror<RdzvRecord>;

  constructor(
    private readonly state: KvState,
    private readonly leader: LeaderService,
    private readonly agents: AgentsService,
  ) {
    this.mirror = new KvMirror<RdzvRecord>(state, PREFIX);
  }

  async onModuleInit(): Promise<void> {
    await this.mirror.start().catch((e) => this.log.warn(`rendezvous mirror: ${(e as Error).message}; reading KV instead`));
    this.leader.whileLeading(() => this.closeOverdue());
    // an agent that is lost leaves every rendezvous it is in (node ids of agents are agent ids)
    this.agents.onAgentLost(async (a) => {
      for (const r of await this.list()) {
        if (rounds.isMember(r, a.agentId)) await this.leave(r.runId, a.agentId).catch(() => undefined);
      }
    });
  }

  private reply(record: RdzvRecord, nodeId?: string): RdzvReply {
    const rank = nodeId !== undefined && record.state === 'closed' ? record.ranks?.[nodeId] : undefined;
    return { ok: true, record, ...(rank !== undefined ? { rank } : {}) };
  }

  join(j: RdzvJoin): Promise<RdzvReply> {
    return this.joins.submit(KV_KEYS.rendezvous(j.runId), j);
  }

  /** One compare-and-set admits a batch of joins to one run (retried whole when another writer won). */
  private async admit(key: string, js: RdzvJoin[]): Promise<Outcome<RdzvReply>[]> {
    let errors: (RangeError | undefined)[] = [];
    const record = await this.state.update<RdzvRecord>(key, (cur) => {
      const out = rounds.joinBatch(cur, js, Date.now());
      errors = out.errors;
      return out.record;
    });
    if (record) this.stored(record);
    return js.map((j, i) => {
      const e = errors[i];
      return e ? { ok: false, error: new ReplyError('CONFLICT', e.message) } : { ok: true, value: this.reply(record!, j.nodeId) };
    });
  }

  async get(runId: string, nodeId?: string): Promise<RdzvReply> {
    let record = await this.state.get<RdzvRecord>(KV_KEYS.rendezvous(runId));
    if (!record) throw new ReplyError('NOT_FOUND', `no rendezvous ${JSON.stringify(runId)}`);
    if (rounds.maybeClose(record, Date.now())) {
      // undefined: deleted (or no longer a valid record) meanwhile
      record = await this.state.update<RdzvRecord>(KV_KEYS.rendezvous(runId), (cur) => cur && rounds.maybeClose(cur, Date.now()));
      if (!record) throw new ReplyError('NOT_FOUND', `no rendezvous ${JSON.stringify(runId)}`);
      this.stored(record);
    }
    return this.reply(record, nodeId);
  }

  async leave(runId: string, nodeId: string): Promise<RdzvReply> {
    let member = false; // set by the update's last attempt: a stranger must not pass for a leave
    const record = await this.state.update<RdzvRecord>(KV_KEYS.rendezvous(runId), (cur) => {
      member = !!cur && rounds.isMember(cur, nodeId);
      return member ? rounds.leave(cur!, nodeId, Date.now()) : undefined;
    });
    if (!record) throw new ReplyError('NOT_FOUND', `no rendezvous ${JSON.stringify(runId)}`);
    if (!member) throw new ReplyError('NOT_FOUND', `node ${nodeId} is not in run ${runId}`);
    this.stored(record);
    return this.reply(record);
  }

  onApplicationShutdown(): void {
    this.mirror.stop();
  }

  async list(): Promise<RdzvRecord[]> {
    if (!this.mirror.isReady) return this.state.list<RdzvRecord>(PREFIX);
    return this.mirror.values().sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
  }

  private async closeOverdue(): Promise<void> {
    const now = Date.now();
    for (const r of await this.list()) {
      if (!rounds.maybeClose(r, now)) continue;
      const closed = await this.state.update<RdzvRecord>(KV_KEYS.rendezvous(r.runId), (cur) => cur && rounds.maybeClose(cur, Date.now()));
      if (closed) this.stored(closed);
    }
  }

  /** Hears how long each round took, from its first join to its close (metrics). */
  onRoundClosed(fn: (seconds: number) => void): void {
    this.closedListeners.push(fn);
  }

  /** A record this replica wrote (or read back): mirrored at once, and its close noted. */
  private stored(r: RdzvRecord): void {
    this.mirror.set(r.runId, r);
    this.noteClosed(r);
  }

  private noteClosed(r: RdzvRecord): void {
    const key = `${r.runId}:${r.round}`;
    if (r.state !== 'closed' || !r.closedAt || !r.participants.length || this.noted.has(key)) return;
    if (this.noted.size > 10_000) this.noted.clear();
    this.noted.add(key);
    const first = r.participants.reduce((m, p) => Math.min(m, Date.parse(p.joinedAt)), Infinity);
    const seconds = (Date.parse(r.closedAt) - first) / 1000;
    // a record read back with times that are not dates measures nothing
    if (!Number.isFinite(seconds) || seconds < 0) return;
    for (const fn of this.closedListeners) fn(seconds);
  }
}

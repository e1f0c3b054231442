// Leader election by a KV lease: the replica holding `leader` (renewed every lease/3) runs the
// timers (lost agents, rendezvous last calls); another replica takes over once it expires.
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { KV_KEYS } from '@cmesh/protocol';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { KvState } from '../state/kv-state';

interface Lease {
  holder: string;
  expiresAt: number;
}

@Injectable()
export class LeaderService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('Leader');
  private timer?: NodeJS.Timeout;
  private leading = false;
  private readonly tasks: (() => Promise<void>)[] = [];

  constructor(
    private readonly state: KvState,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /** Runs `task` on every tick while this replica leads. */
  whileLeading(task: () => Promise<void>): void {
    this.tasks.push(task);
  }

  onModuleInit(): void {
    const tick = Math.max(50, Math.min(this.config.heartbeatMs, this.config.leaseMs / 3));
    this.timer = setInterval(() => void this.tick(), tick);
    void this.tick();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    if (this.leading) {
      // hand over at once rather than after the lease runs out
      await this.state
        .update<Lease>(KV_KEYS.leader, (cur) => (cur?.holder === this.config.replicaId ? { holder: '', expiresAt: 0 } : undefined))
        .catch(() => {});
    }
  }

  private busy = false;
  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const now = Date.now();
      const me = this.config.replicaId;
      const lease = await this.state.update<Lease>(KV_KEYS.leader, (cur) =>
        !cur || cur.holder === me || cur.expiresAt < now ? { holder: me, expiresAt: now + this.config.leaseMs } : undefined,
      );
      const was = this.leading;
      this.leading = lease?.holder === me;
      if (this.leading !== was) this.log.log(this.leading ? `replica ${me} is the leader` : `replica ${me} is a follower`);
      if (this.leading) for (const t of this.tasks) await t();
    } catch (e) {
      this.log.warn(`leader tick: ${(e as Error).message}`);
    } finally {
      this.busy = false;
    }
  }
}

// Scheduled scans (--scan-every, CMESH_SCAN_EVERY): on the leader replica only, a scan of the idle
// agents when the newest scan in the bucket (any replica's, any trigger) is older than the
// interval, so a new leader does not scan again at once. Never two at once (the scan lease). On the
// backend of --scan-backend (CMESH_SCAN_BACKEND): nccl on a GPU cluster.
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { ScanRequestSchema } from '@cmesh/protocol';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { LeaderService } from '../leader/leader.service';
import { ReplyError } from '../nats/reply-error';
import { ScanStore } from './scan-store';
import { ScansService } from './scans.service';

@Injectable()
export class ScanSchedule implements OnModuleInit {
  private readonly log = new Logger('ScanSchedule');
  private checking = false;
  /** after a refused start (too few idle agents, a scan elsewhere), the next try */
  private notBefore = 0;

  constructor(
    private readonly scans: ScansService,
    private readonly store: ScanStore,
    private readonly leader: LeaderService,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  onModuleInit(): void {
    if (!this.config.scanEveryMs) return;
    this.log.log(`scans every ${this.config.scanEveryMs / 1000} s while this replica leads`);
    // not awaited: a leader tick must not wait for a scan's start
    this.leader.whileLeading(async () => void this.check());
  }

  /** Starts a scheduled scan when one is due (the leader's tick calls it). */
  async check(now = Date.now()): Promise<void> {
    if (this.checking || this.scans.busy || now < this.notBefore) return;
    this.checking = true;
    try {
      const [last] = await this.store.list(1);
      if (last && now - Date.parse(last.finishedAt ?? last.createdAt) < this.config.scanEveryMs) return;
      if (last?.state === 'running' && (await this.store.holder(now))) return;
      await this.scans.start(ScanRequestSchema.parse({ backend: this.config.scanBackend }), 'schedule');
    } catch (e) {
      // try again in a minute at most (or the interval, when shorter)
      this.notBefore = now + Math.min(60_000, this.config.scanEveryMs);
      if (e instanceof ReplyError) this.log.log(`scheduled scan not started: ${e.message}`);
      else this.log.warn(`scheduled scan: ${(e as Error).message}`);
    } finally {
      this.checking = false;
    }
  }
}

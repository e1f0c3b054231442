// The live flight recorder: one request on `<cluster>.trace.collect`, every rank that hears it
// (ranks of `cmesh run --rdzv-backend nats`, the agents' job workers) answers with its summary;
// answers are gathered until every job heard from has all its ranks or the wait is over, then the
// library's one analysis says which rank is stuck and where.
import { Inject, Injectable } from '@nestjs/common';
import { TraceDump, analyzeTraces } from '@cmesh/collectives';
import { ClusterNames, TRACE_COLLECT_DEFAULT_MS, TraceCollect, TraceDumpSchema, TraceReport } from '@cmesh/protocol';
import { NatsConnection } from 'nats';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { GatherReplies } from '../nats/gather-replies';
import { NATS_CONNECTION } from '../nats/nats.module';

/** once every job heard from is complete, wait this much longer for a job not heard from yet */
const QUIET_MS = 150;

@Injectable()
export class TraceService {
  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {}

  /** Every answer within `waitMs` (sooner when complete): rank summaries, invalid ones dropped. */
  async collect(req: TraceCollect, waitMs = TRACE_COLLECT_DEFAULT_MS): Promise<{ dumps: TraceDump[]; waitedMs: number }> {
    const started = Date.now();
    const dumps = new Map<string, TraceDump>();
    const sizes = new Map<string, number>();
    let quiet: NodeJS.Timeout | undefined;
    const complete = () => [...sizes.entries()].every(([job, size]) => [...dumps.keys()].filter((k) => k.startsWith(`${job}\0`)).length >= size);
    const replies = new GatherReplies(this.nc, this.names.trace.collect, req, TraceDumpSchema, waitMs);
    for await (const reply of replies) {
      const d = reply as TraceDump;
      dumps.set(`${d.job ?? ''}\0${d.rank}`, d);
      sizes.set(d.job ?? '', d.world_size);
      if (quiet) clearTimeout(quiet);
      quiet = undefined;
      // a job's every rank answered: give the others a moment, then stop
      if (complete()) quiet = setTimeout(() => replies.close(), req.job ? 0 : QUIET_MS);
    }
    if (quiet) clearTimeout(quiet);
    return { dumps: [...dumps.values()], waitedMs: Date.now() - started };
  }

  async report(req: TraceCollect, waitMs?: number): Promise<TraceReport> {
    const { dumps, waitedMs } = await this.collect(req, waitMs);
    return { reports: analyzeTraces(dumps, { nowNs: Date.now() * 1e6 }), answered: dumps.length, waitedMs };
  }
}

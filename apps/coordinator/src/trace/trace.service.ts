// The live flight recorder: one request on `<cluster>.trace.collect`, every rank that hears it
// (ranks of `cmesh run --rdzv-backend nats`, the agents' job workers) answers with its summary;
// answers are gathered until every job heard from has all its ranks or the wait is over, then the
// library's one analysis says which rank is stuck and where.
//
// Anyone allowed to answer requests can answer this one, so answers are authenticated: a rank
// with a data-plane secret signs its answer (with the request's nonce); for a job whose secret
// this replica holds (JobSecrets: the jobs it runs), only answers whose MAC checks are kept, and
// the others are dropped and counted. Answers about any other job (a `cmesh run`, another
// replica's job) cannot be checked here: they are kept, and their reports say `verified: false`.
import { Inject, Injectable, Optional } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { TRACE_MAC_HEADER, TraceDump, analyzeTraces, checkTraceAnswerMac, traceAnswerKey } from '@cmesh/collectives/trace';
import { ClusterNames, TRACE_COLLECT_DEFAULT_MS, TraceCollect, TraceDumpSchema, TraceReport } from '@cmesh/protocol';
import { NatsConnection } from '@nats-io/nats-core';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { JobSecrets } from '../jobs/job-secrets';
import { GatherReplies } from '../nats/gather-replies';
import { InboundMessages } from '../nats/inbound-messages';
import { NATS_CONNECTION } from '../nats/nats.module';

/** once every job heard from is complete, wait this much longer for a job not heard from yet */
const QUIET_MS = 150;

export interface Collected {
  dumps: TraceDump[];
  waitedMs: number;
  /** the jobs whose answers were checked against their secret (every kept dump of them was) */
  verifiedJobs: Set<string>;
  /** answers dropped: a job with a known secret, and no MAC or a wrong one */
  rejected: number;
}

@Injectable()
export class TraceService {
  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
    private readonly secrets: JobSecrets,
    @Optional() private readonly inbound?: InboundMessages,
  ) {}

  /** Every answer within `waitMs` (sooner when complete): rank summaries, invalid or forged ones dropped. */
  async collect(req: TraceCollect, waitMs = TRACE_COLLECT_DEFAULT_MS): Promise<Collected> {
    const started = Date.now();
    const subject = this.names.trace.collect;
    const nonce = randomBytes(16).toString('base64url');
    const dumps = new Map<string, TraceDump>();
    const sizes = new Map<string, number>();
    const verifiedJobs = new Set<string>();
    const keys = new Map<string, Buffer>();
    let rejected = 0;
    let quiet: NodeJS.Timeout | undefined;
    const complete = () => [...sizes.entries()].every(([job, size]) => [...dumps.keys()].filter((k) => k.startsWith(`${job}\0`)).length >= size);
    const replies = new GatherReplies(this.nc, subject, { ...(req.job ? { job: req.job } : {}), nonce }, TraceDumpSchema, waitMs, {
      rejected: (reason, detail) => this.inbound?.dropped(subject, reason, detail),
    });
    for await (const { value, data, headers } of replies.replies()) {
      const d = value as TraceDump;
      const job = d.job ?? '';
      // a request for one job: answers about another are not what was asked (and not counted)
      if (req.job && job !== req.job) continue;
      const secret = job ? this.secrets.get(job) : undefined;
      if (secret !== undefined) {
        let key = keys.get(job);
        if (!key) keys.set(job, (key = traceAnswerKey(secret)));
        if (!checkTraceAnswerMac(key, nonce, data, headers?.get(TRACE_MAC_HEADER) || undefined)) {
          rejected++;
          this.inbound?.dropped(
            subject,
            'bad_mac',
            `an answer for job ${JSON.stringify(job.slice(0, 64))}, rank ${d.rank}, without a valid MAC of the job's secret`,
          );
          continue;
        }
        verifiedJobs.add(job);
      }
      dumps.set(`${job}\0${d.rank}`, d);
      sizes.set(job, d.world_size);
      if (quiet) clearTimeout(quiet);
      quiet = undefined;
      // a job's every rank answered: give the others a moment, then stop
      if (complete()) quiet = setTimeout(() => replies.close(), req.job ? 0 : QUIET_MS);
    }
    if (quiet) clearTimeout(quiet);
    return { dumps: [...dumps.values()], waitedMs: Date.now() - started, verifiedJobs, rejected };
  }

  async report(req: TraceCollect, waitMs?: number): Promise<TraceReport> {
    const { dumps, waitedMs, verifiedJobs, rejected } = await this.collect(req, waitMs);
    const reports = analyzeTraces(dumps, { nowNs: Date.now() * 1e6, verified: (job) => job !== undefined && verifiedJobs.has(job) });
    return { reports, answered: dumps.length, waitedMs, rejected };
  }
}

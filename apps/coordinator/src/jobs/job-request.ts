// A validated request (JobRequestSchema) -> the sweep its members run and its queued record,
// refusing (BAD_REQUEST) what the schema cannot see. Pure: the id, replica and `now` come in.
import { benchSizes, isReduction } from '@cmesh/bench/rows';
import { isFloatDType } from '@cmesh/collectives/names';
import { JobRecord, JobRequest, JobSweep } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';

/** The sizes a request names, in order: listed, or nccl-tests' -b/-e/-f/-i. */
export function jobSizes(r: JobRequest): number[] {
  return r.sizes ?? benchSizes(r.minBytes, r.maxBytes, r.stepFactor, r.stepBytes);
}

export function sweepOf(req: JobRequest): JobSweep {
  if (isReduction(req.op) && req.redop === 'avg' && !isFloatDType(req.dtype)) {
    throw new ReplyError('BAD_REQUEST', `invalid job: redop avg needs a floating-point dtype, got ${req.dtype}`);
  }
  let sizes: number[];
  try {
    sizes = jobSizes(req);
  } catch (e) {
    throw new ReplyError('BAD_REQUEST', `invalid job: ${(e as Error).message}`);
  }
  return {
    op: req.op,
    dtype: req.dtype,
    redop: req.redop,
    root: req.root,
    sizes,
    iters: req.iters,
    warmup: req.warmup,
    check: req.check,
    modes: req.modes,
    timeoutMs: req.timeoutMs,
    backend: req.backend,
    ...(req.algorithm ? { algorithm: req.algorithm } : {}),
  };
}

/** A request naming its members: its root must be one of their ranks. */
export function checkRoot(req: JobRequest, members: number): void {
  if (req.root >= members) throw new ReplyError('BAD_REQUEST', `root ${req.root} is not a rank of ${members} agents`);
}

/** The record of a job just submitted (queued until it starts). */
export function queuedRecord(id: string, req: JobRequest, sweep: JobSweep, replica: string, now: number): JobRecord {
  return {
    id,
    state: 'queued',
    request: req as unknown as Record<string, unknown>,
    sweep,
    members: [],
    rows: [],
    progress: { done: 0, total: sweep.sizes.length },
    replica,
    createdAt: new Date(now).toISOString(),
  };
}

// What one request may ask of the coordinator and its agents: the largest buffer of a job's sweep
// (CMESH_JOB_MAX_BYTES) and how many jobs may wait in this replica's queue (CMESH_JOB_QUEUE_MAX).
// The schema bounds what no setting can raise (JOB_MAX_BYTES_CEILING, 24 h timeouts); these are
// the operator's limits below it. Refusals are typed and change nothing.
import { JOB_MAX_BYTES_DEFAULT, JobRequest } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';

export interface JobLimits {
  /** the largest size (bytes of a job's largest buffer) a request may name */
  maxBytes: number;
  /** queued jobs at most (a job that would queue beyond it is refused, TOO_MANY_REQUESTS) */
  queueMax: number;
}

export const DEFAULT_JOB_QUEUE_MAX = 256;
export const DEFAULT_JOB_LIMITS: JobLimits = { maxBytes: JOB_MAX_BYTES_DEFAULT, queueMax: DEFAULT_JOB_QUEUE_MAX };

/** Refuses (BAD_REQUEST, the fields named as the schema names them) sizes above the limit. */
export function checkJobBytes(req: JobRequest, sizes: readonly number[], maxBytes: number): void {
  const over = `at most ${maxBytes} bytes (the coordinator's CMESH_JOB_MAX_BYTES)`;
  const issues: string[] = [];
  if (req.sizes) req.sizes.forEach((s, i) => s > maxBytes && issues.push(`sizes.${i}: ${over}`));
  else {
    if (req.maxBytes > maxBytes) issues.push(`maxBytes: ${over}`);
    if (req.minBytes > maxBytes) issues.push(`minBytes: ${over}`);
  }
  // what the request expands to (every size) must be under it too, whatever the fields said
  if (!issues.length && sizes.some((s) => s > maxBytes)) issues.push(`sizes: ${over}`);
  if (issues.length) throw new ReplyError('BAD_REQUEST', `invalid job: ${issues.join('; ')}`, issues);
}

/** A job that must wait while `queued` jobs already do: refused (TOO_MANY_REQUESTS) when the queue is full. */
export function checkQueueRoom(queued: number, queueMax: number): void {
  if (queued >= queueMax) {
    throw new ReplyError(
      'TOO_MANY_REQUESTS',
      `the job queue is full: ${queued} jobs are waiting, the limit is ${queueMax} (CMESH_JOB_QUEUE_MAX); try again later`,
    );
  }
}

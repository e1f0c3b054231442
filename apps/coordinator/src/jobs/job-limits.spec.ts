import { JOB_MAX_BYTES_CEILING, JobRequestSchema, describeIssues } from '@cmesh/protocol';
import { ReplyError } from '../nats/reply-error';
import { checkJobBytes, checkQueueRoom } from './job-limits';
import { jobSizes } from './job-request';

const req = (body: Record<string, unknown>) => JobRequestSchema.parse({ op: 'allReduce', ...body });
const refusal = (f: () => void): ReplyError => {
  try {
    f();
  } catch (e) {
    return e as ReplyError;
  }
  throw new Error('not refused');
};

describe('job limits', () => {
  it('refuses listed sizes above the limit, naming each one', () => {
    const r = req({ sizes: [8, 2048, 4096] });
    const e = refusal(() => checkJobBytes(r, jobSizes(r), 1024));
    expect(e).toBeInstanceOf(ReplyError);
    expect(e.code).toBe('BAD_REQUEST');
    expect(e.issues).toEqual([
      `sizes.1: at most 1024 bytes (the coordinator's CMESH_JOB_MAX_BYTES)`,
      `sizes.2: at most 1024 bytes (the coordinator's CMESH_JOB_MAX_BYTES)`,
    ]);
  });

  it('refuses maxBytes and minBytes above the limit; a range under it passes', () => {
    const r = req({ minBytes: 8, maxBytes: 4096 });
    expect(refusal(() => checkJobBytes(r, jobSizes(r), 1024)).issues).toEqual([`maxBytes: at most 1024 bytes (the coordinator's CMESH_JOB_MAX_BYTES)`]);
    const ok = req({ minBytes: 8, maxBytes: 1024 });
    expect(() => checkJobBytes(ok, jobSizes(ok), 1024)).not.toThrow();
  });

  it('the schema refuses what no setting allows: sizes above the ceiling, timeouts above 24 h, repeated modes', () => {
    const bad = JobRequestSchema.safeParse({
      op: 'allReduce',
      sizes: [JOB_MAX_BYTES_CEILING + 1],
      maxBytes: 2 ** 40,
      timeoutMs: 3e9,
      modes: ['in-place', 'in-place'],
    });
    expect(bad.success).toBe(false);
    const issues = describeIssues(bad.error!);
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^sizes\.0: at most 4294967296 bytes/),
        expect.stringMatching(/^maxBytes: at most 4294967296 bytes/),
        expect.stringMatching(/^timeoutMs: at most 86400000 ms \(24 h\)/),
        expect.stringMatching(/^modes: each mode at most once/),
      ]),
    );
    expect(JobRequestSchema.safeParse({ op: 'allReduce', timeoutMs: 86_400_000 }).success).toBe(true);
  });

  it('refuses a job that would queue when the queue is full (TOO_MANY_REQUESTS, naming the limit)', () => {
    expect(() => checkQueueRoom(2, 3)).not.toThrow();
    const e = refusal(() => checkQueueRoom(3, 3));
    expect(e.code).toBe('TOO_MANY_REQUESTS');
    expect(e.message).toBe('the job queue is full: 3 jobs are waiting, the limit is 3 (CMESH_JOB_QUEUE_MAX); try again later');
  });
});

// The job protocol's bounds, without processes: iterations and warm-up are capped so that one
// size's samples (the largest job event) always fit in a NATS message with room to spare.
import { JOB_MAX_ITERS, JOB_MAX_WARMUP, JobEventSchema, JobGetSchema, JobListSchema, JobRequestSchema, describeIssues } from '@cmesh/protocol';

/** nats-server's default max_payload */
const NATS_DEFAULT_MAX_PAYLOAD = 1024 * 1024;

describe('job request bounds', () => {
  it('refuses iters and warmup above the bound, naming the field and the limit', () => {
    const bad = JobRequestSchema.safeParse({ op: 'allReduce', sizes: [8], iters: 40_000, warmup: JOB_MAX_WARMUP + 1 });
    expect(bad.success).toBe(false);
    const issues = describeIssues((bad as { error: import('zod').ZodError }).error);
    expect(issues).toEqual([`iters: at most ${JOB_MAX_ITERS} (one size's samples must fit in one NATS message)`, `warmup: at most ${JOB_MAX_WARMUP}`]);
    expect(JobRequestSchema.safeParse({ op: 'allReduce', sizes: [8], iters: JOB_MAX_ITERS, warmup: JOB_MAX_WARMUP }).success).toBe(true);
  });

  it('keeps the worst-case samples event of one size under half the default max payload', () => {
    // both modes, every time a full-precision double in its longest JSON form, longest ids
    const worst = 1.2345678901234567e-100;
    expect(JSON.stringify(worst)).toHaveLength(23);
    const ev = {
      jobId: 'j'.repeat(64),
      agentId: 'a'.repeat(64),
      rank: 1023,
      type: 'size' as const,
      samples: {
        requestedBytes: 2 ** 40,
        bytes: 2 ** 40,
        count: 2 ** 38,
        variants: (['out-of-place', 'in-place'] as const).map((mode) => ({ mode, times: Array(JOB_MAX_ITERS).fill(worst), wrong: 2 ** 38 })),
      },
    };
    expect(JobEventSchema.safeParse(ev).success).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(ev))).toBeLessThan(NATS_DEFAULT_MAX_PAYLOAD / 2);
    // and a member cannot send more times than that
    ev.samples.variants[0].times.push(worst);
    expect(JobEventSchema.safeParse(ev).success).toBe(false);
  });

  it('validates get and list bodies', () => {
    expect(JobGetSchema.safeParse({}).success).toBe(false);
    expect(JobGetSchema.safeParse({ id: '../x' }).success).toBe(false);
    expect(JobGetSchema.parse({ id: 'j1' })).toEqual({ id: 'j1' });
    expect(JobListSchema.safeParse({ limit: 'x' }).success).toBe(false);
    expect(JobListSchema.safeParse({ limit: 0 }).success).toBe(false);
    expect(JobListSchema.parse({})).toEqual({ limit: 20 });
  });
});

import { JobMemoryError, WORKER_BASE_BYTES, cgroupMemoryLimit, checkWorkerMemory, sweepWorkerBytes } from './worker-memory';

const GiB = 2 ** 30;

describe('job worker memory', () => {
  it('counts the sweep buffers of the largest size: 5x for an all-reduce, plus the base', () => {
    expect(sweepWorkerBytes({ op: 'allReduce', dtype: 'float32', sizes: [8, 1024] }, 2)).toBe(WORKER_BASE_BYTES + 5 * 1024);
    // all-gather: each rank sends 1/n of the size and receives all of it
    expect(sweepWorkerBytes({ op: 'allGather', dtype: 'float32', sizes: [4096] }, 4)).toBe(WORKER_BASE_BYTES + 2 * (1024 + 4096) + 4096);
  });

  it('refuses a sweep that needs more than the limit, naming the agent, the size and the limit', () => {
    expect(() => checkWorkerMemory('agent-0', { op: 'allReduce', dtype: 'float32', sizes: [GiB] }, 2, 64 * GiB)).not.toThrow();
    let err: unknown;
    try {
      checkWorkerMemory('agent-0', { op: 'allReduce', dtype: 'float32', sizes: [8, 2 ** 31] }, 2, 8 * GiB);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(JobMemoryError);
    expect(err).toMatchObject({ name: 'JobMemoryError', code: 'JOB_TOO_LARGE' });
    expect((err as Error).message).toBe(
      'agent agent-0 cannot run this job: its largest size (2147483648 bytes of allReduce, float32) needs about 10.25 GiB in the job worker, more than the 8.00 GiB this agent allows (its memory or cgroup limit, or CMESH_JOB_MEMORY_BYTES)',
    );
  });

  it("reads the cgroup's limit: v2 memory.max, v1 limit_in_bytes; max or v1's huge value is no limit", () => {
    const files = (m: Record<string, string>) => (p: string) => {
      if (p in m) return m[p];
      throw new Error('ENOENT');
    };
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': '536870912\n' }))).toBe(536870912);
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': 'max\n' }))).toBeUndefined();
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '1073741824' }))).toBe(GiB);
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' }))).toBeUndefined();
    expect(cgroupMemoryLimit(files({}))).toBeUndefined();
  });
});

// The nccl backend above the protocol: spec validation, and NcclBackend on a machine without
// NCCL (unavailable, with the reason; a sweep fails with it; the sidecar is stopped by pid). The
// sweep's sizes, data and checks are @cmesh/bench's (tested there against a simulation).
import { buildSidecar, NcclUnavailableError } from '@cmesh/collectives';
import { NcclBackend, validateSweep } from '../src/backends/nccl';

const MISSING_NCCL = '/nonexistent/cmesh-test/libnccl.so.2';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('sweep spec validation', () => {
  const base = { store: null as never, key: 'jobs/1', rank: 0, worldSize: 2, device: 0, collective: 'allReduce' as const, dtype: 'float32' as const, sizes: [8] };
  it('accepts a good spec with defaults', () => {
    expect(validateSweep(base, 2)).toMatchObject({ rank: 0, worldSize: 2, device: 0, redOp: 'sum', root: null, warmup: 5, iters: 20, verify: true });
    // The agent's device, never rank % deviceCount (rank 1 of a job on a 2-GPU host's device 0).
    expect(validateSweep({ ...base, rank: 1 }, 2).device).toBe(0);
    expect(validateSweep({ ...base, rank: 0, device: 1 }, 2).device).toBe(1);
    expect(validateSweep({ ...base, collective: 'broadcast', root: 1 }, 1)).toMatchObject({ root: 1, redOp: null });
  });
  it('rejects bad ranks, roots, ops, dtypes and sizes naming the field', () => {
    expect(() => validateSweep({ ...base, rank: 2 }, 1)).toThrow(/rank must be an integer in \[0, 1\]/);
    expect(() => validateSweep({ ...base, collective: 'reduce', root: 5 }, 1)).toThrow(/root/);
    expect(() => validateSweep({ ...base, collective: 'barrier' as never }, 1)).toThrow(/unknown collective/);
    expect(() => validateSweep({ ...base, dtype: 'int32', redOp: 'avg' }, 1)).toThrow(/AVG needs a floating-point dtype/);
    expect(() => validateSweep({ ...base, dtype: 'int32', redOp: 'band' as never }, 1)).toThrow(/not supported by NCCL/);
    expect(() => validateSweep({ ...base, sizes: [] }, 1)).toThrow(/sizes/);
    expect(() => validateSweep({ ...base, sizes: [1.5] }, 1)).toThrow(/sizes\[0\]/);
    expect(() => validateSweep({ ...base, device: 3 }, 2)).toThrow(/device/);
    expect(() => validateSweep({ ...base, warmup: 0 }, 2)).toThrow(/warmup must be an integer in \[1,/);
    expect(() => validateSweep(base, 0)).toThrow(NcclUnavailableError);
  });
});

describe('NcclBackend without NCCL', () => {
  let binary: string;
  beforeAll(() => {
    binary = buildSidecar();
  }, 300_000);

  it('starts its sidecar, reports unavailable with the reason, fails a sweep with it, and stops the sidecar by pid', async () => {
    const backend = new NcclBackend({ binary, ncclLib: MISSING_NCCL });
    try {
      expect(backend.available()).toEqual({ ok: false, reason: 'nccl backend not started' });
      const a = await backend.start();
      expect(a.ok).toBe(false);
      expect(a.reason).toContain('NCCL unavailable');
      expect(a.reason).toContain(MISSING_NCCL);
      expect(backend.available()).toEqual(a);
      expect(backend.hello!.nccl.available).toBe(false);
      const pid = backend.sidecarPid!;
      expect(isAlive(pid)).toBe(true);
      const err = await backend
        .runSweep({ store: null as never, key: 'jobs/x', rank: 0, worldSize: 1, device: 0, collective: 'allReduce', dtype: 'float32', sizes: [8] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(NcclUnavailableError);
      expect(err.reason).toContain(MISSING_NCCL);
      await backend.stop();
      expect(isAlive(pid)).toBe(false);
    } finally {
      await backend.stop();
    }
  });

  it('reports a sidecar that cannot start as unavailable, with why', async () => {
    const backend = new NcclBackend({ binary: '/nonexistent/cmesh-nccl-sidecar' });
    const a = await backend.start();
    expect(a.ok).toBe(false);
    expect(a.reason).toContain('nccl sidecar failed to start');
    expect(a.reason).toContain('/nonexistent/cmesh-nccl-sidecar');
    await backend.stop();
  });
});

// The agent's nccl path on a machine without NCCL: the sidecar is unavailable, with the reason; a
// sweep fails with it; the sidecar is stopped by pid. The sweep itself (@cmesh/bench's nccl sweep)
// is checked over the simulation in nccl-sim.test.ts and its spec in libs/bench.
import { buildSidecar, isAlive } from '@cmesh/testing';
import { NcclSidecar } from '@cmesh/collectives/nccl';
import { NcclUnavailableError } from '@cmesh/collectives';
import { runNcclSweep } from '@cmesh/bench';

const MISSING_NCCL = '/nonexistent/cmesh-test/libnccl.so.2';

describe('the nccl sidecar without NCCL', () => {
  let binary: string;
  beforeAll(() => {
    binary = buildSidecar();
  }, 300_000);

  it('starts its sidecar, reports unavailable with the reason, fails a sweep with it, and stops the sidecar by pid', async () => {
    const backend = new NcclSidecar({ binary, ncclLib: MISSING_NCCL });
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
      const err = await runNcclSweep(backend, {
        store: null as never,
        key: 'jobs/x',
        rank: 0,
        worldSize: 1,
        device: 0,
        cases: [{ collective: 'allReduce', dtype: 'float32' }],
        sizes: [8],
      }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(NcclUnavailableError);
      expect((err as NcclUnavailableError).reason).toContain(MISSING_NCCL);
      await backend.stop();
      expect(isAlive(pid)).toBe(false);
    } finally {
      await backend.stop();
    }
  });

  it('reports a sidecar that cannot start as unavailable, with why', async () => {
    const backend = new NcclSidecar({ binary: '/nonexistent/cmesh-nccl-sidecar' });
    const a = await backend.start();
    expect(a.ok).toBe(false);
    expect(a.reason).toContain('nccl sidecar failed to start');
    expect(a.reason).toContain('/nonexistent/cmesh-nccl-sidecar');
    await backend.stop();
  });
});

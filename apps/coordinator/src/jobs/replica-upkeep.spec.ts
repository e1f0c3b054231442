import { CLAIM_STALE_MS, claimRenewMs } from './agent-claims';
import { STORE_SWEEP_MS } from './job-buckets';
import { ReplicaUpkeep } from './replica-upkeep';

/** Fakes that count calls: no NATS. */
function upkeep(stale: { jobId: string; replica: string; renewedAt: number }[] = []) {
  const calls: string[] = [];
  const claims = {
    renew: async (ids: string[], job: string) => void calls.push(`renew ${job} ${ids}`),
    sweepStale: async () => (calls.push('sweepStale'), stale),
  };
  const leases = { renew: async () => void calls.push('lease') };
  const recovery = {
    failUnfinishedOfDeadReplicas: async () => void calls.push('unfinished'),
    closeOrphan: async (c: { jobId: string }, has: (id: string) => boolean) => void calls.push(`orphan ${c.jobId} ${has(c.jobId)}`),
  };
  const buckets = { dropUnneeded: async () => void calls.push('buckets') };
  const u = new ReplicaUpkeep(claims as any, leases as any, recovery as any, buckets as any, CLAIM_STALE_MS);
  return { u, calls };
}
const CLAIM_RENEW_MS = claimRenewMs(CLAIM_STALE_MS);
const jobs = { running: () => [{ id: 'j1', agentIds: ['a', 'b'] }], has: (id: string) => id === 'j1' };
const settle = () => new Promise((r) => setImmediate(r));

describe('replica upkeep', () => {
  it('does everything on the first tick, then each chore once per period', async () => {
    const { u, calls } = upkeep();
    const t0 = 1_000_000;
    u.onTick(t0, jobs);
    await settle();
    expect(calls.sort()).toEqual(['buckets', 'lease', 'renew j1 a,b', 'sweepStale', 'unfinished']);
    calls.length = 0;
    u.onTick(t0 + CLAIM_RENEW_MS, jobs);
    await settle();
    expect(calls).toEqual([]);
    u.onTick(t0 + CLAIM_RENEW_MS + 1, jobs);
    await settle();
    expect(calls.sort()).toEqual(['lease', 'renew j1 a,b', 'sweepStale']);
    calls.length = 0;
    u.onTick(t0 + CLAIM_STALE_MS + 1, jobs);
    await settle();
    expect(calls).toContain('unfinished');
    expect(calls).not.toContain('buckets');
    calls.length = 0;
    u.onTick(t0 + STORE_SWEEP_MS + 1, jobs);
    await settle();
    expect(calls).toContain('buckets');
  });

  it('closes each orphaned job once, however many of its claims went stale', async () => {
    const { u, calls } = upkeep([
      { jobId: 'j9', replica: 'r', renewedAt: 0 },
      { jobId: 'j9', replica: 'r', renewedAt: 0 },
      { jobId: 'j8', replica: 'r', renewedAt: 0 },
    ]);
    u.onTick(1_000_000, jobs);
    await settle();
    await settle();
    expect(calls.filter((c) => c.startsWith('orphan'))).toEqual(['orphan j9 false', 'orphan j8 false']);
  });
});

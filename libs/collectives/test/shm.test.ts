// The shared-memory transport: conformance of every collective over it and over TCP, each forced
// (CMESH_TRANSPORT; faults.test.ts runs the fault set over both too), a stopped peer, selection
// and its errors, no segment left behind, bounded memory.
import { readdirSync } from 'fs';
import { expectRankOk, runRanks } from './support/ranks';

const shm = () => ({ CMESH_TRANSPORT: 'shm' });
const devShm = () => new Set(readdirSync('/dev/shm'));
// only cmesh's names: other programs on a shared machine (Open MPI's vader_segment.*) come and go
const leftovers = (before: Set<string>) => [...devShm()].filter((f) => !before.has(f) && /cmesh/i.test(f));

const linux = process.platform === 'linux';
(linux ? describe : describe.skip)('shared-memory transport', () => {
  let before: Set<string>;
  beforeAll(() => {
    before = devShm();
  });
  afterAll(() => {
    // segments are memfds: nothing is ever named in /dev/shm, killed ranks included
    expect(leftovers(before)).toEqual([]);
  });

  // collectives.test.ts runs the default (auto: shared memory on one host); both forced here
  describe.each([
    ['shm', 2],
    ['shm', 3],
    ['shm', 4],
    ['tcp', 2],
    ['tcp', 3],
    ['tcp', 4],
  ])('over %s at world size %i', (transport, world) => {
    it('every collective x dtype x op x algorithm matches the reference', async () => {
      const results = await runRanks('matrix', world, { timeoutMs: 110000, env: () => ({ CMESH_TRANSPORT: transport as string }) });
      for (const r of results) {
        expectRankOk(r);
        expect(r.result.checks).toBeGreaterThan(500);
      }
    }, 120000);
  });

  it('auto puts the ranks of one host on shared memory (a memfd segment per rank, mapped by each peer)', async () => {
    const results = await runRanks('shm', 3, { args: { mode: 'check' }, timeoutMs: 30000, env: () => ({ CMESH_TRANSPORT: 'auto' }) });
    for (const r of results) expect(r.result).toEqual({ ok: true, wrong: [], mappings: 3 });
  }, 40000);

  it('tcp maps no segment', async () => {
    const results = await runRanks('shm', 2, { args: { mode: 'check' }, timeoutMs: 30000, env: () => ({ CMESH_TRANSPORT: 'tcp' }) });
    for (const r of results) expect(r.result).toEqual({ ok: true, wrong: [], mappings: 0 });
  }, 40000);

  it('shm where no segment can be made is a TransportUnavailableError on every rank, saying why', async () => {
    const results = await runRanks('shm', 2, { args: { mode: 'check' }, timeoutMs: 30000, env: () => ({ CMESH_TRANSPORT: 'shm', CMESH_SHM_BYTES: '4096' }) });
    for (const r of results) {
      expect(r.result).toMatchObject({ name: 'TransportUnavailableError', context: { rank: r.rank, peers: [1 - r.rank] } });
      expect(r.result.message).toMatch(/CMESH_SHM_BYTES=4096 is too small/);
    }
  }, 40000);

  it('auto falls back to TCP when no segment can be made, with a debug line', async () => {
    const results = await runRanks('shm', 2, {
      args: { mode: 'check' },
      timeoutMs: 30000,
      env: () => ({ CMESH_TRANSPORT: 'auto', CMESH_SHM_BYTES: '4096', CMESH_DEBUG: 'INFO' }),
    });
    for (const r of results) {
      expect(r.result).toEqual({ ok: true, wrong: [], mappings: 0 });
      expect(r.stderr).toMatch(new RegExp(`shm: TCP to ranks \\[${1 - r.rank}\\] on this host instead of shared memory: .*too small`));
    }
  }, 40000);

  it('a bad CMESH_TRANSPORT is an InvalidArgumentError before any rendezvous', async () => {
    const results = await runRanks('shm', 1, { args: { mode: 'check' }, timeoutMs: 30000, env: () => ({ CMESH_TRANSPORT: 'udp' }) });
    expect(results[0].result).toMatchObject({ name: 'InvalidArgumentError', message: 'CMESH_TRANSPORT must be one of auto, tcp, shm, got "udp"' });
  }, 40000);

  it('a stopped (SIGSTOP) peer fails the op at its timeout, naming that rank', async () => {
    const results = await runRanks('shm', 2, {
      args: { mode: 'stop' },
      timeoutMs: 30000,
      env: shm,
      // rank 1 never resumes: killed once rank 0 has had time to report
      onStart: (children) => setTimeout(() => children[1].kill('SIGKILL'), 12000).unref(),
    });
    expect(results[1].signal).toBe('SIGKILL');
    expect(results[0].result).toMatchObject({ name: 'DistTimeoutError', context: { op: 'allReduce', rank: 0, peers: [1] } });
    expect(results[0].result.opMs).toBeGreaterThanOrEqual(1400);
    expect(results[0].result.opMs).toBeLessThan(4000);
  }, 40000);

  it('RSS does not grow over 100,000 small all-reduces', async () => {
    // a small young generation: V8 otherwise grows it to tens of MiB under this load, which is
    // all the RSS noise there is (TCP shows the same)
    const env = () => ({ CMESH_TRANSPORT: 'shm', NODE_OPTIONS: '--expose-gc --max-semi-space-size=1' });
    const results = await runRanks('shm', 2, { args: { mode: 'rss', calls: 100000 }, timeoutMs: 100000, env });
    for (const r of results) {
      expect(r.result).toMatchObject({ ok: true });
      expect(r.result.mappings).toBe(2);
      // a sample every 10,000 calls: a leak grows from the first tenths to the last (3 MiB is 45
      // bytes a call); V8 giving pages back or keeping them moves single samples by up to 10 MiB
      const s: number[] = r.result.samples;
      const growth = Math.min(...s.slice(-3)) - Math.min(...s.slice(0, 3));
      expect({ rank: r.rank, grew: growth > 3 * 1024 * 1024, samples: s }).toEqual({ rank: r.rank, grew: false, samples: s });
    }
  }, 110000);
});

// Collectives over flags in shared memory (transport/shm/fast.ts): results element by element at
// worlds 2-4 (both halves of the region, one step and in pieces, ops queued without awaiting), the
// algorithm each size ran, a mismatch, a timeout (in one step and mid-pieces) that leaves the ranks
// able to go on, and a peer that dies while the others wait in the op.
import { expectRankOk, runRanks } from './support/ranks';

const shm = () => ({ CMESH_TRANSPORT: 'shm' });

(process.platform === 'linux' ? describe : describe.skip)('collectives over flags in shared memory', () => {
  it.each([2, 4])(
    'world %i: every collective it takes x dtype x op matches the reference, in one step and in pieces',
    async (world) => {
      const results = await runRanks('shm-fast', world, { args: { mode: 'check' }, timeoutMs: 110000, env: shm });
      for (const r of results) {
        expectRankOk(r);
        expect(r.result.checks).toBeGreaterThan(1000);
        const algorithms: Record<string, string[]> = r.result.algorithms;
        for (const [what, names] of Object.entries(algorithms)) expect({ what, names }).toEqual({ what, names: ['shm-flags'] });
        expect(Object.keys(algorithms)).toEqual(
          expect.arrayContaining([
            'allReduce small',
            'allReduce large',
            'broadcast small',
            'broadcast large',
            'allGather large',
            'gather small',
            'gather large',
            'scatter small',
            'scatter large',
            'reduceScatter large',
            'allGather small',
            'reduceScatter small',
            'reduce small',
            'barrier small',
            ...(world > 2 ? ['allReduce split'] : []),
          ]),
        );
      }
    },
    120000,
  );

  it('calls that do not match are a CollectiveMismatchError on every rank, naming the other', async () => {
    const results = await runRanks('shm-fast', 2, { args: { mode: 'mismatch' }, timeoutMs: 30000, env: shm });
    expect(results[0].result.algorithm).toBe('shm-flags');
    expect(results[0].result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { rank: 0, peers: [1] } });
    // its own finding, or rank 1's (reported by rank 1) when rank 0 waited on the event loop and
    // rank 1's abort came in before rank 0 looked at its post
    expect(results[0].result.err.message).toMatch(
      /rank 1 called broadcast\(float32, count=4, root=0\) but rank 0 called allReduce\(float32, count=4\)|rank 0 called allReduce\(float32, count=4\) but rank 1 called broadcast\(float32, count=4, root=0\).*reported by rank 1/,
    );
    expect(results[1].result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { rank: 1, peers: [0] } });
    for (const r of results) expect(r.result.err.opMs).toBeLessThan(5000);
  }, 40000);

  it('sizes either side of a half (one step, pieces) are a CollectiveMismatchError on every rank, at once', async () => {
    const results = await runRanks('shm-fast', 3, { args: { mode: 'straddle' }, timeoutMs: 30000, env: shm });
    expect(results[0].result.algorithm).toBe('shm-flags');
    expect(results[0].result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { op: 'allReduce', rank: 0 } });
    // rank 0 finds the mismatch itself, or hears of it first from a peer that did (reported by)
    const msg: string = results[0].result.err.message;
    expect(msg).toMatch(/collective mismatch: rank \d called allReduce\(float32, count=\d+\) but rank \d called allReduce\(float32, count=\d+\)/);
    expect([msg.includes('count=2048'), msg.includes('count=131072')]).toEqual([true, true]);
    for (const r of results.slice(1)) expect(r.result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { op: 'allReduce', rank: r.rank } });
    // not the op's 20 s timeout
    for (const r of results) expect(r.result.err.opMs).toBeLessThan(5000);
  }, 40000);

  it('an algorithm asked for on one rank only is a CollectiveMismatchError naming the paths', async () => {
    const results = await runRanks('shm-fast', 2, { args: { mode: 'path' }, timeoutMs: 30000, env: shm });
    expect(results[1].result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { op: 'allReduce', rank: 1, peers: [0] } });
    // its own finding, or rank 0's (reported by rank 0) when rank 0's abort came first
    expect(results[1].result.err.message).toMatch(
      /rank 0 runs allReduce\(float32, count=16\) on the rings and rank 1 in one step over shared memory|rank 1 runs allReduce\(float32, count=16\) in one step over shared memory \(shm-flags\) and rank 0 on the rings.*reported by rank 0/,
    );
    expect(results[0].result.err).toMatchObject({ name: 'CollectiveMismatchError', context: { op: 'allReduce', rank: 0, peers: [1] } });
    for (const r of results) expect(r.result.err.opMs).toBeLessThan(5000);
  }, 40000);

  it.each([2, 3])(
    'world %i: agreeing ops alternating between the two paths, not awaited in between, are right',
    async (world) => {
      const results = await runRanks('shm-fast', world, { args: { mode: 'mixed' }, timeoutMs: 60000, env: shm });
      for (const r of results) expectRankOk(r);
    },
    70000,
  );

  it('a peer late past the timeout fails the op naming it; the ranks then go on', async () => {
    const results = await runRanks('shm-fast', 2, { args: { mode: 'late' }, timeoutMs: 30000, env: shm });
    expect(results[0].result.err).toMatchObject({ name: 'DistTimeoutError', context: { op: 'allReduce', rank: 0, peers: [1] } });
    expect(results[0].result.err.opMs).toBeGreaterThanOrEqual(450);
    expect(results[0].result.err.opMs).toBeLessThan(1400);
    // the late rank finds rank 0's part posted and completes the op
    expect(results[1].result.err).toBeUndefined();
    expect(results[1].result.lateResult).toBe(3);
    for (const r of results) expect(r.result.afterWrong).toBe(0);
  }, 40000);

  it('a peer late past the timeout of an op in pieces: both fail it naming the other, then go on', async () => {
    const results = await runRanks('shm-fast', 2, { args: { mode: 'late-large' }, timeoutMs: 30000, env: shm });
    expect(results[0].result.err).toMatchObject({ name: 'DistTimeoutError', context: { op: 'allReduce', rank: 0, peers: [1] } });
    expect(results[0].result.err.opMs).toBeLessThan(1400);
    // rank 0 posted the rest of its pieces abandoned: the late rank fails the op at once
    expect(results[1].result.err).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: 1, peers: [0] } });
    expect(results[1].result.err.opMs).toBeLessThan(1000);
    for (const r of results) expect(r.result.afterWrong).toBe(0);
  }, 40000);

  it('world 4: a peer late past the timeout of an all-reduce split in two: every rank fails it, then all go on', async () => {
    const results = await runRanks('shm-fast', 4, { args: { mode: 'late-large' }, timeoutMs: 30000, env: shm });
    expect(results[0].result.err).toMatchObject({ name: 'DistTimeoutError', context: { op: 'allReduce', rank: 0, peers: [1] } });
    expect(results[0].result.err.opMs).toBeLessThan(1400);
    // rank 0 posted the rest of both halves abandoned: the late rank fails the op at once
    expect(results[1].result.err).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: 1, peers: [0] } });
    expect(results[1].result.err.opMs).toBeLessThan(1000);
    // the others waited for rank 1 too: once it posts they find rank 0's op abandoned (rank 0 went on
    // past it), and fail naming rank 0, not at their own timeout
    for (const r of results.slice(2)) {
      expect(r.result.err).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: r.rank, peers: [0] } });
      expect(r.result.err.opMs).toBeLessThan(5000);
    }
    for (const r of results) expect(r.result.afterWrong).toBe(0);
  }, 40000);

  it('a peer killed while the others wait in the op fails it at once, naming that rank', async () => {
    const results = await runRanks('shm-fast', 3, { args: { mode: 'kill' }, timeoutMs: 30000, env: shm });
    expect(results[1].signal).toBe('SIGKILL');
    for (const r of [results[0], results[2]]) {
      expect(r.result.algorithm).toBe('shm-flags');
      expect(r.result.err).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: r.rank, peers: [1] } });
      expect(r.result.err.message).toMatch(/rank 1 died or closed its connection/);
      // the socket's close, not the op's 20 s timeout
      expect(r.result.err.opMs).toBeLessThan(5000);
    }
  }, 40000);
});

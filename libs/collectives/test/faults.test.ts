// No hang without end: a dead peer, a silent peer and mismatched calls fail promptly, naming who.
import { runRanks } from './support/ranks';

describe('faults', () => {
  it('a rank killed during allReduce fails the others within 5 s, naming that rank', async () => {
    const results = await runRanks('faults', 4, { args: { mode: 'kill' }, timeoutMs: 30000 });
    expect(results[2].signal).toBe('SIGKILL');
    for (const r of results.filter((x) => x.rank !== 2)) {
      expect(r.result).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: r.rank, peers: [2] } });
      expect(r.result.message).toMatch(/rank 2 died/);
      expect(r.result.afterMs).toBeLessThan(5000);
    }
  }, 40000);

  it('a rank that never joins makes the call time out, naming the awaited rank', async () => {
    const results = await runRanks('faults', 3, { args: { mode: 'timeout' }, timeoutMs: 30000 });
    for (const r of results.filter((x) => x.rank !== 1)) {
      expect(r.result.name).toBe('DistTimeoutError');
      expect(r.result.message).toMatch(/rank|ranks/);
      expect(r.result.afterMs).toBeLessThan(4000);
    }
    expect(results[0].result.context).toMatchObject({ op: 'allReduce', rank: 0, peers: [2] });
    // rank 2 waits on rank 1, which never called
    expect(results[2].result.context).toMatchObject({ op: 'allReduce', rank: 2, peers: [1] });
  }, 40000);

  it('ranks calling different collectives get CollectiveMismatchError with both signatures', async () => {
    const results = await runRanks('faults', 2, { args: { mode: 'mismatch' }, timeoutMs: 30000 });
    const messages = results.map((r) => r.result.message).join('\n');
    // the broadcast root only sends, so it may finish; the receiving side must detect the mismatch
    expect(results.every((r) => r.result.ok === true || r.result.name === 'CollectiveMismatchError')).toBe(true);
    expect(results.some((r) => r.result.name === 'CollectiveMismatchError')).toBe(true);
    expect(messages).toMatch(/broadcast\(float32, count=262144, root=0\)/);
    expect(messages).toMatch(/allReduce\(float32, count=262144\)/);
  }, 40000);
});

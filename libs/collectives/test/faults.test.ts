// No hang without end: a dead peer, a silent peer and mismatched calls fail promptly, naming who.
// Over TCP and over shared memory (CMESH_TRANSPORT=shm: no close event there, the sockets beside
// the rings tell).
import { runRanks } from './support/ranks';

describe.each(['tcp', 'shm'])('faults over %s', (transport) => {
  const env = () => ({ CMESH_TRANSPORT: transport });

  it('a rank killed during allReduce fails the others within 5 s, naming that rank', async () => {
    const results = await runRanks('faults', 4, { args: { mode: 'kill' }, timeoutMs: 30000, env });
    expect(results[2].signal).toBe('SIGKILL');
    for (const r of results.filter((x) => x.rank !== 2)) {
      expect(r.result).toMatchObject({ name: 'PeerFailureError', context: { op: 'allReduce', rank: r.rank, peers: [2] } });
      expect(r.result.message).toMatch(/rank 2 died/);
      expect(r.result.afterMs).toBeLessThan(5000);
    }
  }, 40000);

  it('a rank that never joins makes the call time out, naming the awaited rank', async () => {
    const results = await runRanks('faults', 3, { args: { mode: 'timeout' }, timeoutMs: 30000, env });
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
    const results = await runRanks('faults', 2, { args: { mode: 'mismatch' }, timeoutMs: 30000, env });
    const messages = results.map((r) => r.result.message).join('\n');
    // the broadcast root only sends, so it may finish; the receiving side must detect the mismatch
    expect(results.every((r) => r.result.ok === true || r.result.name === 'CollectiveMismatchError')).toBe(true);
    expect(results.some((r) => r.result.name === 'CollectiveMismatchError')).toBe(true);
    expect(messages).toMatch(/broadcast\(float32, count=262144, root=0\)/);
    expect(messages).toMatch(/allReduce\(float32, count=262144\)/);
  }, 40000);

  it('a mismatch is a CollectiveMismatchError on every rank, also on those told by an abort', async () => {
    const results = await runRanks('faults', 3, { args: { mode: 'mismatch3' }, timeoutMs: 30000, env });
    for (const r of results) {
      expect(r.result.name).toBe('CollectiveMismatchError');
      expect(r.result.message).toMatch(/count=3/);
    }
  }, 40000);

  it('a send whose size is not the recv\'s fails the recv with a typed error naming both sizes and the sender', async () => {
    const results = await runRanks('faults', 2, { args: { mode: 'p2pSize' }, timeoutMs: 30000, env });
    expect(results[0].result).toMatchObject({ name: 'CollectiveMismatchError', context: { op: 'recv', rank: 0, peers: [1] } });
    expect(results[0].result.message).toMatch(/rank 1 sent 4 bytes where 8 were expected/);
  }, 40000);

  it('an any-source recv in a group fails promptly when its only possible sender dies', async () => {
    const results = await runRanks('faults', 3, { args: { mode: 'anyDead' }, timeoutMs: 30000, env });
    expect(results[1].signal).toBe('SIGKILL');
    expect(results[0].result).toMatchObject({ name: 'PeerFailureError', context: { op: 'recv', rank: 0, peers: [1] } });
    expect(results[0].result.afterMs).toBeLessThan(5000);
  }, 40000);
});

// No hang without end: a dead peer, a silent peer and mismatched calls fail promptly, naming who.
// Over TCP and over shared memory (CMESH_TRANSPORT=shm: no close event there, the sockets beside
// the rings tell).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
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
    // rank 1 never called. On the ring rank 0 waits on rank 2, which waits on rank 1; over flags in
    // shared memory every rank reads every peer's number, and both name rank 1
    expect(results[0].result.context).toMatchObject({ op: 'allReduce', rank: 0, peers: transport === 'tcp' ? [2] : [1] });
    expect(results[2].result.context).toMatchObject({ op: 'allReduce', rank: 2, peers: [1] });
  }, 40000);

  it('ranks calling different collectives get CollectiveMismatchError with both signatures', async () => {
    const results = await runRanks('faults', 2, { args: { mode: 'mismatch' }, timeoutMs: 30000, env });
    const messages = results.map((r) => r.result.message).join('\n');
    // the broadcast root only sends, so it may finish; the receiving side must detect the mismatch
    for (const r of results) expect([r.rank, r.result.ok === true || r.result.name === 'CollectiveMismatchError', r.result]).toEqual([r.rank, true, r.result]);
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

  it('a broadcast root that destroys its group before the others call: their broadcast gets its data, their next op fails naming it', async () => {
    const results = await runRanks('faults', 3, { args: { mode: 'rootLeaves' }, timeoutMs: 30000, env });
    expect(results.map((r) => r.result)).toEqual([
      { ok: true, wrong: 0 },
      { ok: true, wrong: 0, after: { name: 'PeerFailureError', peers: [0] } },
      { ok: true, wrong: 0, after: { name: 'PeerFailureError', peers: [0] } },
    ]);
  }, 40000);

  it("a send whose size is not the recv's fails the recv with a typed error naming both sizes and the sender", async () => {
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

describe('a rank that never starts', () => {
  it('fails initProcessGroup on the others with DistTimeoutError naming it, so a job blames it and not them', async () => {
    const dist = await import('@cmesh/collectives');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-late-'));
    try {
      const init = dist.initProcessGroup({ backend: 'tcp', initMethod: `file://${dir}/store`, rank: 1, worldSize: 3, timeout: 600 });
      await expect(init).rejects.toMatchObject({
        name: 'DistTimeoutError',
        message: 'data plane: ranks [0, 2] did not publish their address within 600 ms',
        context: { rank: 1, peers: [0, 2] },
      });
      expect(dist.isInitialized()).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 20000);
});

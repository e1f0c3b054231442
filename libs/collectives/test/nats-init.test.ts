// initProcessGroup through nats://host:port/<job>: the store is a JetStream KV bucket on a real
// nats-server; 4 processes all-reduce through it.
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { NatsKvStore } from '../src';
import { runRanks } from './support/ranks';

let nats: NatsServer;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(() => nats?.stop());

it('NatsKvStore has c10d semantics', async () => {
  const a = await NatsKvStore.open({ servers: nats.url, bucket: 'sem', timeoutMs: 5000 });
  const b = await NatsKvStore.open({ servers: nats.url, bucket: 'sem', timeoutMs: 5000 });
  try {
    const pending = b.get('late key with spaces');
    await a.set('late key with spaces', 'v');
    expect((await pending).toString()).toBe('v');
    expect(await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).add('n', 1))).then(() => a.add('n', 0))).toBe(20);
    expect((await a.compareSet('cs', '', 'x')).toString()).toBe('x');
    expect((await b.compareSet('cs', 'y', 'z')).toString()).toBe('x');
    await expect(a.wait(['nope'], 100)).rejects.toThrow(/nope/);
    expect(await a.deleteKey('cs')).toBe(true);
    expect(await a.check(['cs'])).toBe(false);
  } finally {
    await a.close();
    await b.close();
  }
});

it('a process group initialised through nats:// runs allReduce across 4 processes', async () => {
  const results = await runRanks('nats-allreduce', 4, { args: { url: `${nats.url}/job-${Date.now()}` }, timeoutMs: 60000, env: () => ({ CMESH_DEBUG: 'INFO' }) });
  for (const r of results) {
    expect({ code: r.code, errors: r.stderr.split('\n').filter((l) => l && !l.startsWith('[cmesh rank')) }).toEqual({ code: 0, errors: [] });
    expect(r.result).toEqual({ sum: [10, 10, 10] });
  }
  // no secret given: the ranks made one in the (NATS-guarded) store, and the data plane uses it
  const accepted = results.flatMap((r) => r.stderr.split('\n').filter((l) => /connection from rank \d+ accepted/.test(l)));
  expect(accepted).toHaveLength(6);
  expect(accepted.every((l) => l.endsWith('(authenticated)'))).toBe(true);
}, 70000);

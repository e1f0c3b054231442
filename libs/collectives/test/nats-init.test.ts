// initProcessGroup through nats://host:port/<job>: the store is a JetStream KV bucket on a real
// nats-server; 4 processes all-reduce through it.
import net from 'net';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { derivedStoreId, jobBucket, NatsConnectionLostError, NatsKvStore, parseStoreBucket, storeBucket } from '../src';
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

/**
 * A front for the nats-server whose first connections die before the handshake ends, as a server
 * killed while it answers: `reset` of them reset, then `closed` closed; later ones reach the server.
 */
async function dyingFront(target: number, reset: number, closed: number): Promise<{ url: string; close(): Promise<void> }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const front = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    const k = n++;
    if (k < reset) return s.resetAndDestroy();
    if (k < reset + closed) return s.destroy();
    const up = net.connect(target, '127.0.0.1');
    sockets.add(up);
    s.pipe(up).pipe(s);
    s.on('error', () => up.destroy());
    up.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  return {
    url: `nats://127.0.0.1:${(front.address() as net.AddressInfo).port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => front.close(r));
    },
  };
}

it('NatsKvStore.open tries again when a server resets or closes the connection during the handshake; past its deadline it fails with NatsConnectionLostError', async () => {
  const port = Number(new URL(nats.url).port);
  const front = await dyingFront(port, 2, 1);
  try {
    const store = await NatsKvStore.open({ servers: front.url, bucket: 'reset-then-up', timeoutMs: 10_000 });
    await store.set('k', 'v');
    expect((await store.get('k')).toString()).toBe('v');
    await store.destroy();
    await store.close();
  } finally {
    await front.close();
  }
  const dead = await dyingFront(port, 1_000_000, 0);
  try {
    const t0 = Date.now();
    const err = await NatsKvStore.open({ servers: dead.url, bucket: 'never', timeoutMs: 1500 }).catch((e) => e);
    expect(err).toBeInstanceOf(NatsConnectionLostError);
    expect(err.message).toContain(dead.url);
    expect(Date.now() - t0).toBeLessThan(6000);
  } finally {
    await dead.close();
  }
});

it('a process group initialised through nats:// runs allReduce across 4 processes', async () => {
  const results = await runRanks('nats-allreduce', 4, {
    args: { url: `${nats.url}/job-${Date.now()}` },
    timeoutMs: 60000,
    env: () => ({ CMESH_DEBUG: 'INFO' }),
  });
  for (const r of results) {
    expect({ code: r.code, errors: r.stderr.split('\n').filter((l) => l && !l.startsWith('[cmesh rank')) }).toEqual({ code: 0, errors: [] });
    expect(r.result).toEqual({ sum: [10, 10, 10] });
  }
  // no secret given: the ranks made one in the (NATS-guarded) store, and the data plane uses it
  const accepted = results.flatMap((r) => r.stderr.split('\n').filter((l) => /connection from rank \d+ accepted/.test(l)));
  expect(accepted).toHaveLength(6);
  expect(accepted.every((l) => l.endsWith('(authenticated)'))).toBe(true);
}, 70000);

it("a store bucket nobody creates (no coordinator on this server) is created by the rank itself; a nats:// job's bucket is the HMAC of its launchers' secret", async () => {
  const bucket = storeBucket('default', 'init', derivedStoreId('s'.repeat(20), 'default', 'init', 'x'));
  const a = await NatsKvStore.open({ servers: nats.url, bucket, timeoutMs: 5000 });
  const b = await NatsKvStore.open({ servers: nats.url, bucket, timeoutMs: 5000 });
  try {
    await a.set('k', 'v');
    expect((await b.get('k')).toString()).toBe('v');
  } finally {
    await a.destroy();
    await a.close();
    await b.close();
  }
  const one = jobBucket('job-1', { CMESH_SECRET: 'a'.repeat(32) });
  expect(parseStoreBucket(one)).toMatchObject({ cluster: 'default', kind: 'init' });
  expect(jobBucket('job-1', { CMESH_SECRET: 'a'.repeat(32) })).toBe(one);
  expect(jobBucket('job-1', { CMESH_SECRET: 'b'.repeat(32) })).not.toBe(one);
  expect(jobBucket('job-1', { NATS_USER: 'u', NATS_PASSWORD: 'p1' })).not.toBe(jobBucket('job-1', { NATS_USER: 'u', NATS_PASSWORD: 'p2' }));
  expect(jobBucket('job-1', { CMESH_SECRET: 'a'.repeat(32), CMESH_CLUSTER: 'lab' })).toMatch(/^cmesh_lab_store_init_[0-9a-f]{32}$/);
  // a store bucket name (what the coordinator hands its jobs' ranks) is used as it is
  expect(jobBucket(one, { CMESH_SECRET: 'b'.repeat(32) })).toBe(one);
});

it('ranks logged in to NATS derive their data-plane secret from the login: no secret is written to the bucket', async () => {
  const login = { NATS_USER: 'tenant', NATS_PASSWORD: 'tenant-password-0123456789' };
  const authed = await startNatsServer({ config: `authorization { users: [ { user: tenant, password: "${login.NATS_PASSWORD}" } ] }\n` });
  try {
    const job = `job-${Date.now()}`;
    const results = await runRanks('nats-allreduce', 2, {
      args: { url: `${authed.url}/${job}` },
      timeoutMs: 60000,
      env: () => ({ ...login, CMESH_DEBUG: 'INFO' }),
    });
    for (const r of results) expect([r.code, r.result]).toEqual([0, { sum: [3, 3, 3] }]);
    const accepted = results.flatMap((r) => r.stderr.split('\n').filter((l) => /connection from rank \d+ accepted/.test(l)));
    expect(accepted.length).toBeGreaterThan(0);
    expect(accepted.every((l) => l.endsWith('(authenticated)'))).toBe(true);
    const { connect } = await import('@nats-io/transport-node');
    const { Kvm } = await import('@nats-io/kv');
    const nc = await connect({ servers: authed.url, user: login.NATS_USER, pass: login.NATS_PASSWORD });
    try {
      const keys: string[] = [];
      for await (const k of await (await new Kvm(nc).open(jobBucket(job, login), { bindOnly: true })).keys()) keys.push(k);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.filter((k) => /secret/.test(k))).toEqual([]);
    } finally {
      await nc.close();
    }
  } finally {
    await authed.stop();
  }
}, 70000);

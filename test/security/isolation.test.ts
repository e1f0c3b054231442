// Clusters and logins on one authenticated nats-server, tried as a hostile neighbour would: two
// clusters (`default` and `lab`, each with its coordinator) and three client logins (`client` and
// `team-b` of the default cluster, `lab-client` of lab).
//
// - two `cmesh run --rdzv-backend nats` runs, one per cluster, with the same --rdzv-id: each gets
//   a bucket of its own and finishes with every element right; neither login can list, delete or
//   have its coordinator create the other's;
// - a second login of the same cluster cannot derive another's rendezvous bucket, sees none of its
//   keys, and cannot list or delete streams;
// - two runs that keep the default --rdzv-id get different buckets; a multi-node run without one
//   is refused naming the flag;
// - a client cannot create a stream itself; the coordinator creates only store buckets of its
//   cluster, with one value per key and its byte and age limits.
import { randomBytes } from 'crypto';
import * as path from 'path';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { clusterNames, DEFAULT_STORE_MAX_AGE_S, DEFAULT_STORE_MAX_BYTES, natsPermissions, NatsRole } from '@cmesh/protocol';
import { NatsKvStore } from '@cmesh/collectives';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { Mesh, startMesh, cmesh, CmeshResult } from '@cmesh/testing/mesh';
import { TestLogins } from './support/logins';
import { rdzvBucket, rdzvIdFor } from '@cmesh/cli/commands';

const FIX = path.resolve(__dirname, '../../apps/cli/test/fixtures/env-allreduce.ts');
const USERS: { user: string; role: NatsRole; cluster: string }[] = [
  { user: 'coordinator', role: 'coordinator', cluster: 'default' },
  { user: 'coord-lab', role: 'coordinator', cluster: 'lab' },
  { user: 'client', role: 'client', cluster: 'default' },
  { user: 'team-b', role: 'client', cluster: 'default' },
  { user: 'lab-client', role: 'client', cluster: 'lab' },
];
const PASSWORDS = Object.fromEntries(USERS.map((u) => [u.user, randomBytes(24).toString('base64url')]));
/** What a process of this login runs with: its NATS login, and its cluster. */
const loginEnv = (user: string): NodeJS.ProcessEnv => {
  const cluster = USERS.find((u) => u.user === user)!.cluster;
  return { NATS_USER: user, NATS_PASSWORD: PASSWORDS[user], CMESH_SECRET: '', ...(cluster === 'default' ? {} : { CMESH_CLUSTER: cluster }) };
};

describe("clusters and logins on one NATS server cannot reach each other's stores", () => {
  let nats: NatsServer;
  const meshes: Mesh[] = [];

  const logins = new TestLogins(
    () => nats.url,
    (user) => PASSWORDS[user],
  );
  const login = (user: string) => logins.login(user);

  /** A `cmesh run` of one node and two workers through the nats rendezvous, as this login. */
  const run = (user: string, id: string | undefined, extra: string[] = []): Promise<CmeshResult> =>
    cmesh(
      ['run', '--nproc-per-node', '2', '--rdzv-backend', 'nats', '--rdzv-endpoint', `127.0.0.1:${nats.port}`, ...(id ? ['--rdzv-id', id] : []), ...extra, FIX],
      { env: loginEnv(user), timeoutMs: 120_000 },
    );
  const sums = (r: CmeshResult) => [...r.out.matchAll(/^\[rank(\d)\]:sum (\S+)$/gm)].map((m) => `${m[1]}:${m[2]}`).sort();
  const secrets = (r: CmeshResult) => new Set([...r.out.matchAll(/^\[rank\d\]:secret (\S+)$/gm)].map((m) => m[1]));

  beforeAll(async () => {
    // one server, both clusters' logins, each with its role's permissions in its own cluster
    const users = USERS.map((u) => ({ user: u.user, password: PASSWORDS[u.user], permissions: natsPermissions(u.role, clusterNames(u.cluster), u.user) }));
    nats = await startNatsServer({ config: `authorization: ${JSON.stringify({ users }, null, 2)}\n` });
    for (const [cluster, user] of [
      ['default', 'coordinator'],
      ['lab', 'coord-lab'],
    ]) {
      meshes.push(await startMesh({ agents: 0, natsUrl: nats.url, port: 0, cluster, env: loginEnv(user), write: () => undefined, readyTimeoutMs: 90_000 }));
    }
  }, 200_000);

  afterAll(async () => {
    await logins.closeAll();
    for (const m of meshes) await m.stop();
    await nats?.stop();
  });

  it("same-named runs in two clusters get separate buckets, both finish right, and neither login reaches the other's", async () => {
    const id = `shared-${Date.now()}`;
    const [a, b] = await Promise.all([run('client', id), run('lab-client', id)]);
    for (const r of [a, b]) {
      expect({ code: r.code, err: r.code === 0 ? '' : r.out + r.err }).toEqual({ code: 0, err: '' });
      expect(sums(r)).toEqual(['0:1', '1:1']); // 0 + 1 on each rank of its own world of 2
    }
    // each run's workers got a secret of their own
    expect([secrets(a).size, secrets(b).size]).toEqual([1, 1]);
    expect([...secrets(a)][0]).not.toBe([...secrets(b)][0]);

    const mine = rdzvBucket(id, loginEnv('client'));
    const theirs = rdzvBucket(id, loginEnv('lab-client'));
    expect(mine).not.toBe(theirs);
    expect(clusterNames().stores.parse(mine)).toMatchObject({ kind: 'rdzv' });
    expect(clusterNames('lab').stores.parse(theirs)).toMatchObject({ kind: 'rdzv' });
    // the launchers may not delete streams any more: the buckets stay until the coordinator's sweep
    const coordinator = await login('coordinator');
    const cjsm = await jetstreamManager(coordinator.nc);
    await expect(cjsm.streams.info(`KV_${mine}`)).resolves.toBeTruthy();
    await expect(cjsm.streams.info(`KV_${theirs}`)).resolves.toBeTruthy();

    // lab's client, even knowing the default cluster's bucket name, can neither list nor delete it,
    // nor have either coordinator create a bucket of the other cluster
    const lab = await login('lab-client');
    const ljsm = await jetstreamManager(lab.nc, { checkAPI: false });
    await expect(ljsm.streams.names().next()).rejects.toThrow(/Permissions Violation/);
    await expect(ljsm.streams.list().next()).rejects.toThrow(/Permissions Violation/);
    await expect(ljsm.streams.delete(`KV_${mine}`)).rejects.toThrow(/Permissions Violation/);
    await expect(ljsm.streams.purge(`KV_${mine}`)).rejects.toThrow(/Permissions Violation/);
    const otherCluster = clusterNames().stores.bucket('rdzv', 'f'.repeat(32));
    const refused = (await lab.nc.request(clusterNames('lab').stores.open, JSON.stringify({ bucket: otherCluster }), { timeout: 10_000 })).json();
    expect(refused).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST', message: expect.stringContaining('not a store bucket of cluster lab') } });
    const before = lab.violations.length;
    lab.nc.publish(clusterNames().stores.open, JSON.stringify({ bucket: otherCluster }));
    await lab.nc.flush();
    await new Promise((r) => setTimeout(r, 200));
    expect(lab.violations.slice(before)).toEqual([`PermissionViolationError: Permissions Violation for Publish to "${clusterNames().stores.open}"`]);
    await expect(cjsm.streams.info(`KV_${otherCluster}`)).rejects.toThrow(/stream not found/);
    await expect(cjsm.streams.info(`KV_${mine}`)).resolves.toBeTruthy();
  }, 180_000);

  it("a second login of the cluster cannot derive, list or delete another login's rendezvous bucket", async () => {
    const id = `job-${Date.now()}`;
    const client = await login('client');
    const teamB = await login('team-b');
    const bucket = rdzvBucket(id, loginEnv('client'));
    // created by the coordinator on the client's request (the client may not create streams)
    const store = await NatsKvStore.open({ connection: client.nc, bucket, timeoutMs: 10_000 });
    await store.set('rdzv/x/master', '10.0.0.1:29500');
    const info = await (await jetstreamManager(client.nc, { checkAPI: false })).streams.info(`KV_${bucket}`);
    expect({ history: info.config.max_msgs_per_subject, bytes: info.config.max_bytes, ageS: info.config.max_age / 1e9 }).toEqual({
      history: 1,
      bytes: DEFAULT_STORE_MAX_BYTES,
      ageS: DEFAULT_STORE_MAX_AGE_S,
    });

    // team-b names the same id from its own secret: another bucket, empty
    const guess = rdzvBucket(id, loginEnv('team-b'));
    expect(guess).not.toBe(bucket);
    const its = await NatsKvStore.open({ connection: teamB.nc, bucket: guess, timeoutMs: 10_000 });
    expect(await its.check(['rdzv/x/master'])).toBe(false);
    // and cannot find the client's by listing, nor delete or purge it
    const tjsm = await jetstreamManager(teamB.nc, { checkAPI: false });
    await expect(tjsm.streams.names().next()).rejects.toThrow(/Permissions Violation/);
    await expect(tjsm.streams.delete(`KV_${bucket}`)).rejects.toThrow(/Permissions Violation/);
    await expect(tjsm.streams.purge(`KV_${bucket}`)).rejects.toThrow(/Permissions Violation/);
    expect((await store.get('rdzv/x/master')).toString()).toBe('10.0.0.1:29500');
    await store.close();
    await its.close();
  }, 60_000);

  it('two runs that keep the default --rdzv-id get different buckets; more nodes without one are refused naming the flag', async () => {
    const ids = [rdzvIdFor('nats', undefined, 1), rdzvIdFor('nats', undefined, 1)];
    expect(ids[0]).not.toBe(ids[1]);
    expect(rdzvBucket(ids[0], loginEnv('client'))).not.toBe(rdzvBucket(ids[1], loginEnv('client')));
    expect(rdzvIdFor('c10d', undefined, 2)).toBe('none'); // torch's default where nothing is shared through NATS
    expect(() => rdzvIdFor('nats', undefined, 2)).toThrow(/--rdzv-id/);

    // both at once, same login: before, both kept `none` and met in one bucket (one world of 4, or a closed rendezvous)
    const [a, b] = await Promise.all([run('client', undefined), run('client', undefined)]);
    for (const r of [a, b]) {
      expect({ code: r.code, err: r.code === 0 ? '' : r.out + r.err }).toEqual({ code: 0, err: '' });
      expect(sums(r)).toEqual(['0:1', '1:1']);
    }
    const runIds = [a, b].map((r) => new Set([...r.out.matchAll(/"CMESH_RUN_ID":"([^"]+)"/g)].map((m) => m[1])));
    expect(runIds.map((s) => s.size)).toEqual([1, 1]);
    expect([...runIds[0]][0]).not.toBe([...runIds[1]][0]);

    const multi = await run('client', undefined, ['--nnodes', '2']);
    expect(multi.code).not.toBe(0);
    expect(multi.err).toMatch(/--rdzv-backend nats on up to 2 nodes needs --rdzv-id/);
  }, 180_000);

  it("a client cannot create a stream; the coordinator creates only its own cluster's store buckets", async () => {
    const client = await login('client');
    const n = clusterNames();
    const bucket = n.stores.bucket('init', randomBytes(16).toString('hex'));
    const jsm = await jetstreamManager(client.nc, { checkAPI: false });
    await expect(jsm.streams.add({ name: `KV_${bucket}`, subjects: [`$KV.${bucket}.>`] })).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.add({ name: 'capture', subjects: ['cmesh.>'] })).rejects.toThrow(/Permissions Violation/);
    await expect(new Kvm(client.nc).create(bucket, { history: 1 })).rejects.toThrow(/Permissions Violation/);
    // stores.open: a name of the cluster's store pattern only, else a typed refusal and nothing made
    const ask = async (b: unknown) => (await client.nc.request(n.stores.open, JSON.stringify({ bucket: b }), { timeout: 10_000 })).json();
    expect(await ask(n.buckets.state)).toMatchObject({
      ok: false,
      error: { code: 'BAD_REQUEST', message: expect.stringContaining('not a store bucket of cluster default') },
    });
    expect(await ask(clusterNames('lab').stores.bucket('jobs', 'x'))).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
    expect(await ask('KV_x.>')).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
    expect(await ask(bucket)).toEqual({ ok: true, bucket, created: true });
    expect(await ask(bucket)).toEqual({ ok: true, bucket, created: false }); // idempotent
    // a bucket name outside the pattern: the client cannot make it, and nobody makes it for it
    await expect(NatsKvStore.open({ connection: client.nc, bucket: 'legacy_bucket', timeoutMs: 1500 })).rejects.toThrow(
      /cannot open JetStream KV bucket legacy_bucket/,
    );
    const coordinator = await login('coordinator');
    await expect((await jetstreamManager(coordinator.nc)).streams.info('KV_legacy_bucket')).rejects.toThrow(/stream not found/);
  }, 60_000);
});

// Job record retention against a real nats-server: the newest `kept` records, and none older than
// maxAgeMs, in memory and in the KV bucket alike; a record is removed without a delete marker,
// and opening a bucket an older version filled with markers clears them and sets its max_age.
import { connect } from '@nats-io/transport-node';
import { NatsConnection, nanos } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { JobRecord, clusterNames } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { JobStore } from '../src/jobs/job-store';

const JOBS_BUCKET = clusterNames().buckets.jobs;

// a record the store reads back must be valid (one that is not is skipped, and purged at open)
const sweep: JobRecord['sweep'] = {
  op: 'allReduce',
  dtype: 'float32',
  redop: 'sum',
  root: 0,
  sizes: [8],
  iters: 1,
  warmup: 0,
  check: true,
  modes: ['out-of-place'],
  timeoutMs: 1000,
  backend: 'tcp',
};
const rec = (id: string, state: JobRecord['state'] = 'succeeded'): JobRecord => ({
  id,
  state,
  request: {},
  sweep,
  members: [],
  rows: [],
  progress: { done: 0, total: 0 },
  createdAt: new Date().toISOString(),
  finishedAt: new Date().toISOString(),
});

describe('JobStore retention', () => {
  let nats: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });
  afterEach(async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${JOBS_BUCKET}`).catch(() => undefined);
  });

  const subjects = async () => {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(`KV_${JOBS_BUCKET}`, { subjects_filter: '>' });
    return {
      keys: Object.keys(info.state.subjects ?? {})
        .map((s) => s.split('.').pop())
        .sort(),
      maxAge: info.config.max_age,
      messages: info.state.messages,
    };
  };

  it('keeps the newest `kept` records and purges the others without delete markers', async () => {
    const store = new JobStore(nc, JOBS_BUCKET, { kept: 3, maxAgeMs: 3600_000 });
    await store.open();
    for (let i = 0; i < 10; i++) await store.write(rec(`j${i}`));
    await store.write(rec('j8')); // rewriting a kept one evicts nothing
    expect(store.recentIds(100)).toEqual(['j9', 'j8', 'j7']);
    expect(store.size()).toBe(3);
    expect(await subjects()).toEqual({ keys: ['j7', 'j8', 'j9'], maxAge: nanos(3600_000), messages: 3 });
    expect(await store.read('j0')).toBeNull();
  });

  it('forgets finished records older than maxAgeMs, never a running one', async () => {
    const store = new JobStore(nc, JOBS_BUCKET, { kept: 100, maxAgeMs: 300 });
    await store.open();
    await store.write(rec('jold'));
    await store.write(rec('jrun', 'running'));
    await new Promise((r) => setTimeout(r, 400));
    await store.write(rec('jnew'));
    expect(store.recentIds(100)).toEqual(['jnew', 'jrun']);
    await new Promise((r) => setTimeout(r, 100));
    expect((await subjects()).keys).not.toContain('jold');
  });

  it('opening a bucket full of delete markers clears them and takes the configured max_age', async () => {
    const kv = await new Kvm(nc).create(JOBS_BUCKET, { history: 1 });
    for (let i = 0; i < 5; i++) {
      await kv.put(`jm${i}`, new TextEncoder().encode(JSON.stringify(rec(`jm${i}`))));
      if (i < 4) await kv.delete(`jm${i}`);
    }
    expect((await subjects()).keys).toHaveLength(5);
    const store = new JobStore(nc, JOBS_BUCKET, { kept: 10, maxAgeMs: 60_000 });
    await store.open();
    expect(await subjects()).toEqual({ keys: ['jm4'], maxAge: nanos(60_000), messages: 1 });
    expect(store.recentIds(10)).toEqual(['jm4']);
  });
});

// A KV bucket's stream by its public names (KvStream): listing a bucket while its keys are
// rewritten (agents heartbeat, claims are renewed) returns every key, and a purge leaves no marker.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { KvStream } from '../src/state/kv-keys';

describe('KvStream (real nats-server)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
  }, 30_000);
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('names the stream and the key subjects nats.js stores the bucket under', async () => {
    const kv = await new Kvm(nc).create('cmesh_lab_state', { history: 1 });
    const stream = await KvStream.of(nc, 'cmesh_lab_state');
    expect(stream.name).toBe((await kv.status()).streamInfo.config.name);
    await kv.put('agents.a-1', 'x');
    const info = await (await jetstreamManager(nc)).streams.info(stream.name, { subjects_filter: '>' });
    expect(Object.keys(info.state.subjects ?? {})).toEqual([stream.subject('agents.a-1')]);
  });

  it('lists every key while all of them are being rewritten, skips none after deletes', async () => {
    const kv = await new Kvm(nc).create('kvkeys_test', { history: 1 });
    const stream = await KvStream.of(nc, 'kvkeys_test');
    const names = Array.from({ length: 24 }, (_, i) => `agents.a${String(i).padStart(2, '0')}`);
    for (const n of names) await kv.put(n, 'x');
    await kv.put('groups.g0', 'x');
    let writing = true;
    const writers = names.map(async (n) => {
      for (let i = 0; writing && i < 100_000; i++) await kv.put(n, String(i));
    });
    try {
      for (let round = 0; round < 100; round++) {
        expect((await stream.keys('agents.>')).sort()).toEqual(names);
      }
    } finally {
      writing = false;
      await Promise.all(writers);
    }
    expect((await stream.keys()).sort()).toEqual([...names, 'groups.g0'].sort());
    // a deleted key keeps its marker's subject: listed, and read back as missing by the callers
    await kv.delete('groups.g0');
    expect(await stream.keys('groups.>')).toEqual(['groups.g0']);
    expect((await kv.get('groups.g0'))?.operation).toBe('DEL');
    // a purge leaves nothing: not listed, read back as never written
    await stream.purge('groups.g0');
    expect(await stream.keys('groups.>')).toEqual([]);
    expect(await kv.get('groups.g0')).toBeNull();
    expect((await stream.keys('agents.>')).sort()).toEqual(names);
  }, 60_000);
});

// Listing a KV bucket while its keys are rewritten (agents heartbeat, claims are renewed) must
// return every key.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { Kvm } from '@nats-io/kv';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { kvKeys } from '../src/state/kv-keys';

describe('kvKeys (real nats-server)', () => {
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

  it('lists every key while all of them are being rewritten, skips none after deletes', async () => {
    const kv = await new Kvm(nc).create('kvkeys_test', { history: 1 });
    const names = Array.from({ length: 24 }, (_, i) => `agents.a${String(i).padStart(2, '0')}`);
    for (const n of names) await kv.put(n, 'x');
    await kv.put('groups.g0', 'x');
    let writing = true;
    const writers = names.map(async (n) => {
      for (let i = 0; writing && i < 100_000; i++) await kv.put(n, String(i));
    });
    try {
      for (let round = 0; round < 100; round++) {
        expect((await kvKeys(kv, 'agents.>')).sort()).toEqual(names);
      }
    } finally {
      writing = false;
      await Promise.all(writers);
    }
    expect((await kvKeys(kv)).sort()).toEqual([...names, 'groups.g0'].sort());
    // a deleted key keeps its marker's subject: listed, and read back as missing by the callers
    await kv.delete('groups.g0');
    expect(await kvKeys(kv, 'groups.>')).toEqual(['groups.g0']);
    expect((await kv.get('groups.g0'))?.operation).toBe('DEL');
  }, 60_000);
});

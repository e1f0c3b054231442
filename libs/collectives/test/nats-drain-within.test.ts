// A process stopping while its NATS server is away must still stop: drainWithin bounds the drain.
import { connect } from '@nats-io/transport-node';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { NATS_RECONNECT, drainWithin } from '../src';

describe('drainWithin (real nats-server)', () => {
  let nats: NatsServer;
  beforeEach(async () => {
    nats = await startNatsServer();
  }, 30_000);
  afterEach(async () => {
    await nats?.stop();
  });

  it('drains a healthy connection', async () => {
    const nc = await connect({ servers: nats.url });
    const got: string[] = [];
    nc.subscribe('x', { callback: (_e, m) => void got.push(m.string()) });
    nc.publish('x', 'last');
    await drainWithin(nc, 5000);
    expect([nc.isClosed(), got]).toEqual([true, ['last']]);
  });

  it('closes a connection whose server is gone (reconnecting forever) within the bound', async () => {
    const nc = await connect({ servers: nats.url, ...NATS_RECONNECT });
    nc.subscribe('x', { callback: () => undefined });
    await nats.stop();
    const t0 = Date.now();
    await drainWithin(nc, 1000);
    expect([nc.isClosed(), Date.now() - t0 < 3000]).toEqual([true, true]);
  });
});

import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { isAlive, startNatsServer } from '../src';

it('starts a real nats-server with JetStream and stops it by pid', async () => {
  const server = await startNatsServer();
  try {
    const nc = await connect({ servers: server.url });
    const kv = await new Kvm(nc).create('fixture_check');
    await kv.put('k', new TextEncoder().encode('v'));
    expect(new TextDecoder().decode((await kv.get('k'))!.value)).toBe('v');
    await nc.close();
  } finally {
    await server.stop();
  }
  expect(isAlive(server.pid)).toBe(false);
});

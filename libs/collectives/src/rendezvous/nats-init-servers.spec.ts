import { initMethodServers } from './nats';

const at = (u: string) => new URL(u);

it("a nats:// init method reaches its host, and the other servers of NATS_URL's cluster when NATS_URL names that host", () => {
  const NATS_URL = 'nats://127.0.0.1:4222,nats://127.0.0.1:4223, nats://127.0.0.1:4224';
  expect(initMethodServers(at('nats://127.0.0.1:4222/job-1'), { NATS_URL })).toBe('nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224');
  // the init method's host first, whichever of the cluster it is
  expect(initMethodServers(at('nats://127.0.0.1:4224/job-1'), { NATS_URL })).toBe('nats://127.0.0.1:4224,nats://127.0.0.1:4222,nats://127.0.0.1:4223');
  // the default port on either side
  expect(initMethodServers(at('nats://nats/job-1'), { NATS_URL: 'nats://nats:4222,nats://nats-1:4222' })).toBe('nats://nats:4222,nats://nats-1:4222');
  // NATS_URL of another cluster (or none): the init method's host alone
  expect(initMethodServers(at('nats://10.0.0.5:4222/job-1'), { NATS_URL })).toBe('nats://10.0.0.5:4222');
  expect(initMethodServers(at('nats://10.0.0.5:4222/job-1'), {})).toBe('nats://10.0.0.5:4222');
  expect(initMethodServers(at('nats://127.0.0.1:4222/job-1'), { NATS_URL: 'not a url,,' })).toBe('nats://127.0.0.1:4222');
});

// NATS over TLS, as operations.md documents it: nats-server with a certificate and logins, and a
// cmesh client given NATS_USER, NATS_PASSWORD_FILE and NATS_TLS_CA_FILE (natsLogin(), what every
// cmesh process uses) connects over TLS, verifying the server; without the CA it cannot.
import { execFileSync } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { tmpdir } from 'os';
import { join } from 'path';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { natsLogin } from '../src';

const dir = mkdtempSync(join(tmpdir(), 'cmesh-nats-tls-'));
let server: NatsServer;
const PASSWORD = 'p'.repeat(32);

beforeAll(async () => {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=cmesh test CA', '-keyout', 'ca.key', '-out', 'ca.crt');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'san.ext', '-out', 'server.crt');
  writeFileSync(join(dir, 'password'), PASSWORD, { mode: 0o600 });
  server = await startNatsServer({
    config: `tls { cert_file: "${join(dir, 'server.crt')}", key_file: "${join(dir, 'server.key')}" }\nauthorization { users: [ { user: "client", password: "${PASSWORD}" } ] }\n`,
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('connects over TLS with the CA and a login from the environment; not without the CA', async () => {
  const env = { NATS_USER: 'client', NATS_PASSWORD_FILE: join(dir, 'password'), NATS_TLS_CA_FILE: join(dir, 'ca.crt') };
  const nc = await connect({ ...natsLogin(env), servers: server.url });
  expect(nc.info?.tls_required).toBe(true);
  await nc.close();
  const { NATS_TLS_CA_FILE: _ca, ...noCa } = env;
  await expect(connect({ ...natsLogin(noCa), servers: server.url, reconnect: false, timeout: 3000 })).rejects.toThrow();
});

it('refuses half a login, naming the variables and never a value', () => {
  expect(() => natsLogin({ NATS_PASSWORD: PASSWORD })).toThrow(/NATS_USER is not/);
  expect(() => natsLogin({ NATS_USER: 'u', NATS_PASSWORD: PASSWORD, NATS_PASSWORD_FILE: '/x' })).toThrow(/both set/);
  expect(() => natsLogin({ NATS_USER: 'u', NATS_PASSWORD_FILE: join(dir, 'missing') })).toThrow(/cannot read .*missing \(ENOENT\)/);
  try {
    natsLogin({ NATS_PASSWORD: PASSWORD });
  } catch (e) {
    expect((e as Error).message).not.toContain(PASSWORD);
  }
});

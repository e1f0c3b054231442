// docker-compose.nats-cluster.yml on top of docker-compose.yml, checked without a Docker engine:
// `docker-compose config` of the two files (three NATS servers, each named, with its own volume,
// stopped in lame duck mode; the coordinator, agents and example services given all three; the
// coordinator waits for all three), and auth-init's own command run here, its files then used by
// three real nats-servers as the containers use them (host names mapped to loopback ports): they
// form one JetStream cluster, admit the mesh's logins and refuse anonymous clients.
import { spawn, spawnSync, ChildProcess } from 'child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';
import { load } from 'js-yaml';
import { connect } from '@nats-io/transport-node';
import { AuthorizationError } from '@nats-io/nats-core';
import { freePort, waitForPort } from '@cmesh/testing';

const ROOT = resolve(__dirname, '../..');
const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');
const FILES = ['docker-compose.yml', 'docker-compose.nats-cluster.yml'].flatMap((f) => ['-f', join(ROOT, f)]);
const hasCompose = spawnSync('sh', ['-c', 'command -v docker-compose']).status === 0;
if (!hasCompose) console.warn('docker-compose not installed (apt-get install docker-compose): the config check is skipped');
const NATS = ['nats', 'nats-1', 'nats-2'];
const override = load(readFileSync(join(ROOT, 'docker-compose.nats-cluster.yml'), 'utf8')) as { services: Record<string, any> };
/** auth-init's command in the override, as its shell runs it */
const authInit = override.services['auth-init'].entrypoint.at(-1) as string;

(hasCompose ? it : it.skip)('docker-compose config: three named servers with their own stores, lame duck on stop; every client given all three', () => {
  const r = spawnSync('docker-compose', [...FILES, 'config'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, CMESH_PUBLISH_ADDRESS: '127.0.0.1' } });
  expect([r.status, r.stderr]).toEqual([0, '']);
  const { services, volumes } = load(r.stdout) as { services: Record<string, any>; volumes: Record<string, unknown> };
  const urls = NATS.map((s) => `nats://${s}:4222`).join(',');
  const stores = new Set<string>();
  for (const s of NATS) {
    const n = services[s];
    expect([s, n.environment.SERVER_NAME]).toEqual([s, s]);
    expect(n.command.slice(0, 2)).toEqual(['-c', '/secrets/nats/nats-cluster.conf']);
    expect(n.command).toEqual(expect.arrayContaining(['--jetstream', '--store_dir', '/data']));
    const store = n.volumes.find((v: string) => /:\/data(:rw)?$/.test(v));
    stores.add(store.split(':')[0]);
    expect(n.stop_signal).toBe('SIGUSR2');
    // lame duck mode's 2 s grace and 30 s duration fit in the time compose gives it before SIGKILL
    expect(Number(/^(\d+)s$/.exec(n.stop_grace_period)![1])).toBeGreaterThan(32);
    expect(n.depends_on['auth-init'].condition).toBe('service_completed_successfully');
    expect(services.coordinator.depends_on[s].condition).toBe('service_healthy');
  }
  expect(stores.size).toBe(3);
  for (const v of stores) expect(Object.keys(volumes)).toContain(v);
  for (const s of ['coordinator', 'rank-agent-0', 'rank-agent-1', 'weights']) expect([s, services[s].environment.NATS_URL]).toEqual([s, urls]);
  // the routes auth-init writes are the three services' route ports
  expect(/--nats-routes (\S+)/.exec(services['auth-init'].entrypoint.at(-1))![1]).toBe(NATS.map((s) => `${s}:6222`).join(','));
});

describe("auth-init's files, used by three nats-servers", () => {
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  afterAll(() => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('form one JetStream cluster that admits the mesh logins only', async () => {
    const secrets = mkdtempSync(join(tmpdir(), 'cmesh-compose-secrets-'));
    dirs.push(secrets);
    // auth-init's command, but this checkout's cmesh and a temporary directory for /secrets
    const init = /(secrets init \/secrets [^&]+)&&/.exec(authInit)![1].trim().replace('/secrets', secrets).split(/\s+/);
    const r = spawnSync(process.execPath, [CMESH, ...init], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toContain('nats-cluster.conf');
    const files = readFileSync(join(secrets, 'nats', 'routes.conf'), 'utf8');
    const routePassword = readFileSync(join(secrets, 'nats', 'cluster.route-password'), 'utf8').trim();
    expect(files).toContain(`nats-route://route:${routePassword}@nats-1:6222`);

    const nodes = await Promise.all(
      NATS.map(async (name) => ({
        name,
        port: await freePort(),
        monitor: await freePort(),
        clusterPort: await freePort(),
        dir: mkdtempSync(join(tmpdir(), `cmesh-compose-${name}-`)),
      })),
    );
    dirs.push(...nodes.map((n) => n.dir));
    for (const n of nodes) {
      // each container mounts the same secrets volume; here each server its copy, with the
      // container's cluster port and the other containers' names as loopback ports
      cpSync(join(secrets, 'nats'), join(n.dir, 'nats'), { recursive: true });
      const conf = join(n.dir, 'nats', 'nats-cluster.conf');
      writeFileSync(conf, readFileSync(conf, 'utf8').replace(/^ {2}port: 6222$/m, `  port: ${n.clusterPort}`));
      let routes = files;
      for (const m of nodes) routes = routes.split(`@${m.name}:6222`).join(`@127.0.0.1:${m.clusterPort}`);
      writeFileSync(join(n.dir, 'nats', 'routes.conf'), routes);
      procs.push(
        spawn(
          'nats-server',
          ['-c', conf, '--jetstream', '--store_dir', join(n.dir, 'data'), '-a', '127.0.0.1', '-p', String(n.port), '-m', String(n.monitor)],
          { stdio: 'ignore', env: { ...process.env, SERVER_NAME: n.name } },
        ),
      );
    }
    for (const n of nodes) expect(await waitForPort(n.port, 10_000)).toBe(true);
    let metas: { leader?: string; cluster_size?: number }[] = [];
    for (const end = Date.now() + 30_000; Date.now() < end; await new Promise((res) => setTimeout(res, 250))) {
      metas = await Promise.all(
        nodes.map(
          async (n) =>
            ((await (await fetch(`http://127.0.0.1:${n.monitor}/jsz`)).json()) as { meta_cluster?: { leader?: string; cluster_size?: number } }).meta_cluster ??
            {},
        ),
      );
      // one leader named by all, and every server counting all three (routes come up one by one)
      if (new Set(metas.map((m) => m.leader)).size === 1 && metas[0].leader && metas.every((m) => m.cluster_size === 3)) break;
    }
    expect(metas.map((m) => [m.leader, m.cluster_size])).toEqual(nodes.map(() => [metas[0].leader, 3]));
    expect(NATS).toContain(metas[0].leader);
    // the mesh's logins work on any server; nobody gets in without one
    const servers = nodes.map((n) => `nats://127.0.0.1:${n.port}`);
    const nc = await connect({ servers: servers[2], user: 'agent-0', pass: readFileSync(join(secrets, 'nats', 'agent-0.password'), 'utf8').trim() });
    await nc.flush();
    await nc.close();
    await expect(connect({ servers: servers[1], reconnect: false })).rejects.toThrow(AuthorizationError);
  }, 90_000);
});

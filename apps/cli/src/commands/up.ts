// `cmesh up --agents N`: nats-server (embedded by default, or --nats URL), the coordinator and N
// rank agents on this machine, until Ctrl-C; then every child is stopped by pid. A process that
// dies is restarted alone (up to 5 times a minute, with backoff); --no-restart stops the mesh instead.
import { Command } from 'commander';
import { uiLoginLink } from '@cmesh/protocol';
import { startMesh } from '../mesh/launch';
import { holdMesh } from '../mesh/lifetime';
import { CLIENT_USER } from '../mesh/mesh-auth';
import { stateDir } from '../mesh/state-dir';
import { UsageError } from '../usage';

interface UpOpts {
  agents: string;
  nats?: string;
  natsPort: string;
  natsCluster: string;
  port: string;
  host: string;
  cluster?: string;
  restart: boolean;
  auth: boolean;
  stateDir?: string;
  tenant: string[];
}

function int(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return n;
}

const collect = (v: string, all: string[]) => [...all, v];

/** A tenant's NATS user name: not one of the mesh's own logins. */
export function tenantName(v: string): string {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(v)) throw new UsageError(`--tenant ${JSON.stringify(v)}: letters, digits, _ and - only (1..64)`);
  if (v === 'coordinator' || /^agent-\d+$/.test(v)) throw new UsageError(`--tenant ${JSON.stringify(v)}: the name of one of the mesh's own logins`);
  return v;
}

/** --nats-cluster: 1 (one server) or an odd count of 3 or more, the sizes a RAFT majority suits. */
export function natsClusterSize(v: string, natsUrl: string | undefined): number {
  const n = int('--nats-cluster', v, 1, 7);
  if (n > 1 && natsUrl) throw new UsageError('--nats-cluster starts nats-servers; --nats uses one already running: give one of them');
  // two servers have no majority once one stops: JetStream would stop with either
  if (n > 1 && n % 2 === 0) throw new UsageError(`--nats-cluster ${n}: an odd count (3, 5, 7), so that a majority remains when one server stops`);
  return n;
}

export function register(program: Command): void {
  program
    .command('up')
    .description('start a local mesh: nats-server, the coordinator and N rank agents (Ctrl-C stops all)')
    .option('--agents <n>', 'number of rank agents', '2')
    .option('--nats <url>', 'use this NATS server (JetStream on) instead of starting one')
    .option('--nats-port <port>', 'port of the embedded nats-server (0: any free port); of the first one with --nats-cluster', '4222')
    .option('--nats-cluster <n>', 'start n nats-servers forming one JetStream cluster (3: the mesh outlives any one of them) instead of one', '1')
    .option('--port <port>', 'coordinator HTTP port (0: any free port)', '7700')
    .option('--host <host>', 'address everything listens on', '127.0.0.1')
    .option('--cluster <name>', 'cluster name: its subjects and buckets on the NATS server are its own (default: the default cluster)')
    .option('--no-restart', 'stop the whole mesh when one process dies, instead of restarting that process')
    .option('--state-dir <dir>', 'where the generated secrets and the nats-server configuration live (default: CMESH_STATE_DIR, else ~/.cmesh)')
    .option(
      '--tenant <name>',
      'a NATS login of its own (client role) for one more tenant, besides client (repeatable): its password is <state-dir>/nats/<name>.password',
      collect,
      [],
    )
    .option('--no-auth', 'no authentication at all (local play only): anyone reaching the NATS port or the coordinator can act as any process')
    .action(async (o: UpOpts) => {
      const log = (s: string) => process.stdout.write(s + '\n');
      const dir = o.stateDir ?? stateDir();
      const mesh = await startMesh({
        agents: int('--agents', o.agents, 1, 256),
        natsUrl: o.nats,
        natsPort: int('--nats-port', o.natsPort, 0, 65535),
        natsCluster: natsClusterSize(o.natsCluster, o.nats),
        port: int('--port', o.port, 0, 65535),
        host: o.host,
        cluster: o.cluster,
        restart: o.restart,
        write: log,
        auth: o.auth ? { stateDir: dir, tenants: o.tenant.map(tenantName) } : undefined,
      });
      for (const s of mesh.natsServers ?? [])
        log(`cmesh: ${s.name}: ${s.url}, routes on port ${s.clusterPort}, monitoring http://${o.host}:${s.httpPort} (/healthz, /jsz), pid file ${s.pidFile}`);
      log(`cmesh: mesh up: nats ${mesh.natsUrl}, coordinator ${mesh.coordinatorUrl}, agents ${mesh.agentNames.join(' ')}`);
      log(`cmesh: CMESH_COORDINATOR=${mesh.coordinatorUrl} cmesh status | cmesh bench --mesh; Ctrl-C to stop`);
      // a login link that reads only, never the API token (cmesh ui prints it again)
      log(`cmesh: live page: ${uiLoginLink(mesh.coordinatorUrl, mesh.auth?.apiToken)}`);
      if (mesh.auth) {
        // where the secrets are, never what they are
        log(`cmesh: authentication on; secrets in ${mesh.auth.stateDir} (the API token: ${mesh.auth.apiTokenFile}, read by cmesh status on this machine)`);
        if (!o.nats) {
          for (const user of [CLIENT_USER, ...o.tenant])
            log(`cmesh: NATS clients (cmesh run --rdzv-backend nats): NATS_USER=${user} NATS_PASSWORD_FILE=${mesh.auth.login(user).NATS_PASSWORD_FILE}`);
        }
      } else log('cmesh: authentication OFF (--no-auth): anyone who reaches these ports can act as any process');
      process.exitCode = await holdMesh(mesh, log);
    });
}

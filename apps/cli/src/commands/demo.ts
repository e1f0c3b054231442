// `cmesh demo` (`make demo`): brings up a mesh of 4 agents, runs every collective the agents run
// through it with results checked, then a bench sweep, then stops everything. Exit 0 only when
// every check passed and no process is left.
import { Command } from 'commander';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { runDemo } from '../mesh/demo-script';
import { startMesh } from '../mesh/launch';
import { withMesh } from '../mesh/lifetime';
import { formatEndpoints, metricsEndpoints } from '../mesh/metrics-endpoints';
import { UsageError } from '../usage';

export function register(program: Command): void {
  program
    .command('demo')
    .description('up with 4 agents, every collective through the mesh (results checked), a bench sweep, clean shutdown')
    .option('--agents <n>', 'number of rank agents', '4')
    .option('--nats <url>', 'use this NATS server instead of starting one')
    .option('--verbose', 'show the output of the mesh processes')
    .action(async (o: { agents: string; nats?: string; verbose?: boolean }) => {
      const out = (s: string) => process.stdout.write(s);
      const log = (s: string) => out(s + '\n');
      const agents = Number(o.agents);
      if (!Number.isInteger(agents) || agents < 1 || agents > 64) throw new UsageError(`--agents must be an integer in [1, 64], got ${o.agents}`);
      const t0 = Date.now();
      log(`cmesh demo: starting nats-server, the coordinator and ${agents} agents`);
      const tail: string[] = [];
      // the demo's mesh authenticates like `cmesh up`'s, with secrets that live as long as it does
      const secrets = mkdtempSync(join(tmpdir(), 'cmesh-demo-'));
      const mesh = await startMesh({
        agents,
        natsUrl: o.nats,
        natsPort: 0,
        port: 0,
        auth: { stateDir: secrets },
        write: (line) => {
          if (o.verbose) log(line);
          tail.push(line);
          if (tail.length > 200) tail.shift();
        },
      }).catch((e: Error) => {
        rmSync(secrets, { recursive: true, force: true });
        process.stderr.write(tail.slice(-40).join('\n') + '\n');
        throw e;
      });
      log(`cmesh demo: mesh up in ${Date.now() - t0} ms: nats ${mesh.natsUrl}, coordinator ${mesh.coordinatorUrl}, agents ${mesh.agentNames.join(' ')}`);
      const pids = mesh.supervisor.pids();
      let failures = 0;
      try {
        failures = await withMesh(mesh, log, async () => {
          const f = await runDemo(mesh.client, agents, out);
          // the Prometheus endpoints, scraped once while the mesh is still up (dashboards/ has the rest)
          const eps = await metricsEndpoints(mesh.client);
          log(`\n== metrics endpoints (Prometheus text format; Grafana dashboard and rules in dashboards/)\n${formatEndpoints(eps)}`);
          return f + eps.filter((e) => e.error || e.cmeshSeries === 0).length;
        });
      } catch (e) {
        process.stderr.write(tail.slice(-40).join('\n') + '\n');
        throw e;
      } finally {
        rmSync(secrets, { recursive: true, force: true });
      }
      const left = pids.filter(isAlive);
      log(`cmesh demo: mesh stopped; ${left.length ? `processes left: ${left.join(' ')}` : `all ${pids.length} processes gone`}`);
      log(failures === 0 && left.length === 0 ? `cmesh demo: OK (${Date.now() - t0} ms)` : `cmesh demo: ${failures} check(s) FAILED`);
      if (failures || left.length) process.exitCode = 1;
    });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
